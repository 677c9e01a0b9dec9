#!/usr/bin/env node
// Interop check: drive term2-acp with the official ACP TypeScript SDK's DEFAULT export, the
// v1 client every shipping editor speaks (`ClientSideConnection` from
// @agentclientprotocol/sdk), with Zed's exact `initialize`.
//
// Usage:
//   node client_v1.mjs --workspace /abs/dir --outside /abs/dir [--timeout-ms 60000] [-- <agent command...>]
//
// The agent command comes from the arguments after "--", else from the JSON array in
// $TERM2ACP_INTEROP_AGENT, else it is <repo>/bin/term2-acp --provider scripted. The agent
// inherits this process's environment (TERM2ACP_SCRIPT, TERM2ACP_HOME, ...).
//
// Scenario, first agent process: initialize -> session/new -> a text turn -> a tool turn
// (read_file inside the workspace through fs/read_text_file, which answers with an unsaved
// "buffer"; create_file inside through fs/write_text_file; a read outside answered "allow
// once"; a create outside answered "reject") -> a turn cancelled mid-stream ->
// session/list -> session/close. Second agent process (same store): initialize ->
// session/load (the history is replayed before the answer) -> session/list ->
// session/close.
//
// Anything the SDK objects to is a failure: console.error/console.warn output (the SDK
// logs dropped notifications as "Error handling notification ..."), rejected promises,
// uncaught exceptions, error responses, error responses the SDK writes back to the agent,
// non-JSON lines on the agent's stdout, and data the SDK's zod schemas silently dropped
// (raw wire message vs. parsed value). The last stdout line is a JSON summary; the exit
// status is 0 only when nothing failed.

import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";

import * as acp from "@agentclientprotocol/sdk";

import { fail, failures, losses, parseArgs, show, stderrWrite, tappedStream } from "./capture.mjs";

const PROMPTS = {
  text: "Say hello.",
  tools: "Use the tools.",
  cancel: "Stream until I cancel.",
};
const BUFFER_TEXT = "unsaved buffer of notes.txt\n";
const ZED_INITIALIZE = {
  protocolVersion: 1,
  clientCapabilities: {
    fs: { readTextFile: true, writeTextFile: true },
    terminal: true,
    auth: { terminal: true },
    _meta: { terminal_output: true, "terminal-auth": true },
  },
  clientInfo: { name: "zed", version: "0.212.7" },
};

// ------------------------------------------------------------------ the client (Zed-like)
const summary = {
  ok: false,
  agentCommand: null,
  initialize: null,
  sessionId: null,
  turns: {}, // label -> {stopReason, text, kinds: {sessionUpdate: count}}
  toolCalls: {}, // toolCallId -> {title, kind, firstKind, statuses, output}
  permissionRequests: [],
  fsRequests: [],
  cancelLatencyMs: null,
  listed: null,
  closeResult: null,
  load: null,
  relisted: null,
  reclosed: null,
  agentExits: [],
  wire: [],
  failures,
};

let phase = "setup";
const agents = []; // every agent process started, in order

function textOf(block) {
  return block && block.type === "text" ? block.text : "";
}

class ZedLikeClient {
  constructor(options, record) {
    this.options = options;
    this.record = record; // {updates: [], permissions: []} as handed over by the SDK
    this.onUpdate = null;
  }

  async requestPermission(params) {
    this.record.permissions.push(params);
    const input = params.toolCall?.rawInput ?? {};
    const isCreate = typeof input.content === "string";
    const wanted = isCreate ? "reject_once" : "allow_once";
    const option = params.options.find((o) => o.kind === wanted);
    summary.permissionRequests.push({
      phase,
      toolCallId: params.toolCall?.toolCallId ?? null,
      title: params.toolCall?.title ?? null,
      options: params.options.map((o) => `${o.optionId}:${o.kind}`),
      answered: option ? option.optionId : "cancelled",
    });
    if (!option) {
      fail(`permission request without a ${wanted} option: ${show(params.options)}`);
      return { outcome: { outcome: "cancelled" } };
    }
    return { outcome: { outcome: "selected", optionId: option.optionId } };
  }

  async sessionUpdate(params) {
    this.record.updates.push(params);
    const update = params.update;
    const turn = summary.turns[phase];
    if (turn) {
      turn.kinds[update.sessionUpdate] = (turn.kinds[update.sessionUpdate] ?? 0) + 1;
      if (update.sessionUpdate === "agent_message_chunk") turn.text += textOf(update.content);
    }
    if (update.sessionUpdate === "tool_call" || update.sessionUpdate === "tool_call_update") {
      const call = (summary.toolCalls[update.toolCallId] ??= { title: null, kind: null, firstKind: update.sessionUpdate, statuses: [] });
      if (update.title) call.title = update.title;
      if (update.kind) call.kind = update.kind;
      if (update.status) call.statuses.push(update.status);
      if (update.content && (update.status === "completed" || update.status === "failed")) {
        call.output = update.content.map((c) => (c.type === "content" ? textOf(c.content) : `[${c.type} ${c.path ?? ""}]`)).join("").slice(0, 500);
      }
    }
    if (this.onUpdate) this.onUpdate(params);
  }

  async readTextFile(params) {
    summary.fsRequests.push({ method: "fs/read_text_file", path: params.path });
    if (params.path === path.join(this.options.workspace, "notes.txt")) return { content: BUFFER_TEXT };
    return { content: fs.readFileSync(params.path, "utf8") };
  }

  async writeTextFile(params) {
    summary.fsRequests.push({ method: "fs/write_text_file", path: params.path, content: params.content });
    fs.mkdirSync(path.dirname(params.path), { recursive: true });
    fs.writeFileSync(params.path, params.content);
    return {};
  }
}

function startAgent(options) {
  const child = spawn(options.command[0], options.command.slice(1), {
    stdio: ["pipe", "pipe", "inherit"],
    env: process.env,
  });
  child.on("error", (error) => fail(`cannot start the agent: ${show(error)}`));
  const wire = { incoming: [], outgoing: [], badLines: [] };
  const record = { updates: [], permissions: [] };
  const client = new ZedLikeClient(options, record);
  const connection = new acp.ClientSideConnection(() => client, tappedStream(child, wire, acp.ndJsonStream));
  const agent = { child, wire, record, client, connection };
  agents.push(agent);
  return agent;
}

async function runTurn(agent, sessionId, label, text) {
  phase = label;
  summary.turns[label] = { stopReason: null, text: "", kinds: {} };
  const response = await agent.connection.prompt({ sessionId, prompt: [{ type: "text", text }] });
  summary.turns[label].stopReason = response.stopReason;
  return response;
}

async function firstProcess(options) {
  const agent = startAgent(options);
  const { connection } = agent;
  phase = "initialize";
  const init = await connection.initialize(ZED_INITIALIZE);
  summary.initialize = init;
  if (init.protocolVersion !== 1) fail(`initialize: protocolVersion ${init.protocolVersion}, expected 1`);
  if (!init.agentCapabilities?.loadSession) fail("initialize: loadSession is not advertised");

  phase = "new";
  const { sessionId } = await connection.newSession({ cwd: options.workspace, mcpServers: [] });
  summary.sessionId = sessionId;

  await runTurn(agent, sessionId, "text", PROMPTS.text);
  await runTurn(agent, sessionId, "tools", PROMPTS.tools);

  // cancel as soon as the turn streams its first chunk
  let cancelledAt = null;
  agent.client.onUpdate = (params) => {
    if (cancelledAt === null && params.update.sessionUpdate === "agent_message_chunk") {
      cancelledAt = Date.now();
      connection.cancel({ sessionId }).catch((error) => fail(`cancel: ${show(error)}`));
    }
  };
  await runTurn(agent, sessionId, "cancel", PROMPTS.cancel);
  summary.cancelLatencyMs = cancelledAt === null ? null : Date.now() - cancelledAt;
  agent.client.onUpdate = null;

  phase = "list";
  const listed = await connection.listSessions({ cwd: options.workspace });
  const mine = listed.sessions.find((s) => s.sessionId === sessionId);
  summary.listed = { count: listed.sessions.length, found: Boolean(mine), title: mine?.title ?? null, cwd: mine?.cwd ?? null };

  phase = "close";
  summary.closeResult = await connection.closeSession({ sessionId });
  return agent;
}

async function secondProcess(options) {
  const agent = startAgent(options);
  const { connection, record } = agent;
  phase = "initialize-2";
  await connection.initialize(ZED_INITIALIZE);
  phase = "load";
  const before = record.updates.length;
  const loaded = await connection.loadSession({ sessionId: summary.sessionId, cwd: options.workspace, mcpServers: [] });
  const replayed = record.updates.slice(before);
  const kinds = {};
  for (const { update } of replayed) kinds[update.sessionUpdate] = (kinds[update.sessionUpdate] ?? 0) + 1;
  summary.load = {
    result: loaded,
    beforeResponse: replayed.length,
    kinds,
    order: replayed.map(({ update }) => update.sessionUpdate),
    userText: replayed.filter(({ update }) => update.sessionUpdate === "user_message_chunk").map(({ update }) => textOf(update.content)),
    agentText: replayed.filter(({ update }) => update.sessionUpdate === "agent_message_chunk").map(({ update }) => textOf(update.content)).join(""),
  };
  phase = "list-2";
  const listed = await connection.listSessions({});
  summary.relisted = listed.sessions.map((s) => s.sessionId);
  phase = "close-2";
  summary.reclosed = await connection.closeSession({ sessionId: summary.sessionId });
  return agent;
}

function waitExit(child, ms) {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) {
      resolve({ code: child.exitCode, signal: child.signalCode });
      return;
    }
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      resolve({ code: null, signal: "SIGKILL", timedOut: true });
    }, ms);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal });
    });
  });
}

async function stop(agent) {
  try {
    agent.child.stdin.end();
  } catch (error) {
    fail(`closing the agent's stdin: ${show(error)}`);
  }
  const exit = await waitExit(agent.child, 10000);
  summary.agentExits.push(exit);
  if (exit.code !== 0) fail(`the agent exited with ${show(exit)}`);
}

function checkWire(agent) {
  const { wire, record } = agent;
  for (const message of wire.outgoing) {
    if (message && "error" in message) fail(`the SDK client answered the agent with an error: ${show(message)}`);
  }
  for (const message of wire.incoming) {
    if (message && "error" in message && !("method" in message)) fail(`error response from the agent: ${show(message)}`);
  }
  for (const line of wire.badLines) fail(`non-JSON line on the agent's stdout: ${line}`);
  const rawUpdates = wire.incoming.filter((m) => m && m.method === "session/update" && !("id" in m));
  if (rawUpdates.length !== record.updates.length) {
    fail(`${rawUpdates.length} session/update notifications on the wire, ${record.updates.length} passed the SDK's validation`);
  } else {
    rawUpdates.forEach((m, i) => losses(m.params, record.updates[i], "session/update").forEach(fail));
  }
  const rawPermissions = wire.incoming.filter((m) => m && m.method === "session/request_permission" && "id" in m);
  if (rawPermissions.length !== record.permissions.length) {
    fail(`${rawPermissions.length} permission requests on the wire, ${record.permissions.length} reached the handler`);
  } else {
    rawPermissions.forEach((m, i) => losses(m.params, record.permissions[i], "request_permission").forEach(fail));
  }
  const byKind = {};
  for (const m of wire.incoming) {
    const kind = "method" in m ? ("id" in m ? `request:${m.method}` : `notification:${m.method}`) : "response";
    byKind[kind] = (byKind[kind] ?? 0) + 1;
  }
  return byKind;
}

async function main() {
  let options;
  try {
    options = parseArgs(process.argv.slice(2), ["outside"]);
  } catch (error) {
    stderrWrite(`client_v1.mjs: ${error.message}`);
    process.exit(2);
  }
  summary.agentCommand = options.command;
  const watchdog = setTimeout(() => {
    fail(`timed out after ${options.timeoutMs} ms in phase ${phase}`);
    finish(3);
  }, options.timeoutMs);
  try {
    await stop(await firstProcess(options));
    await stop(await secondProcess(options));
  } catch (error) {
    fail(`in phase ${phase}: ${show(error)}${error?.stack ? "\n" + error.stack : ""}`);
  }
  clearTimeout(watchdog);
  await new Promise((resolve) => setTimeout(resolve, 50)); // late rejections surface first
  finish(1);
}

let finished = false;
function finish(failureCode) {
  if (finished) return;
  finished = true;
  summary.wire = agents.map(checkWire);
  for (const agent of agents) {
    if (agent.child.exitCode === null && agent.child.signalCode === null) agent.child.kill("SIGKILL");
  }
  summary.ok = failures.length === 0;
  process.stdout.write(JSON.stringify(summary) + "\n");
  if (!summary.ok) stderrWrite(`client_v1.mjs: FAILED\n  - ${failures.join("\n  - ")}`);
  process.exitCode = summary.ok ? 0 : failureCode;
  setTimeout(() => process.exit(process.exitCode), 100).unref();
}

main();
