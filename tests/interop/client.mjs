#!/usr/bin/env node
// Interop check: drive term2-acp with the official ACP TypeScript SDK's experimental v2
// CLIENT (@agentclientprotocol/sdk/experimental/v2) over its newline-delimited JSON stream.
//
// Usage:
//   node client.mjs --workspace /abs/dir [--timeout-ms 60000] [-- <agent command...>]
//
// The agent command comes from the arguments after "--", else from the JSON array in
// $TERM2ACP_INTEROP_AGENT, else it is <repo>/bin/term2-acp --provider scripted. The agent
// inherits this process's environment (TERM2ACP_SCRIPT, TERM2ACP_HOME, ...).
//
// Scenario: initialize -> session/new -> prompt #1 (the scripted turn streams a thought,
// text, usage and tool calls; a permission request is answered "allow once") until the
// idle stop -> prompt #2 read with ActiveSession.readText() -> session/list ->
// session/resume {replayFrom: start} -> session/close -> close the connection.
//
// Anything the SDK objects to is a failure: console.error/console.warn output (the SDK
// logs dropped notifications as "Error handling notification ..."), rejected promises,
// uncaught exceptions, JSON-RPC errors, error responses the SDK writes back to the agent,
// non-JSON lines on the agent's stdout, and data the SDK's zod schemas silently dropped
// (raw wire message vs. parsed value). The last stdout line is a JSON summary; the exit
// status is 0 only when nothing failed.

import { spawn } from "node:child_process";

import * as acp from "@agentclientprotocol/sdk/experimental/v2";

import { fail, failures, losses, parseArgs, show, stderrWrite, tappedStream } from "./capture.mjs";

const FIRST_PROMPT = "Read the notes, then the file outside the workspace.";
const SECOND_PROMPT = "And now?";

// `wire` keeps every raw message in both directions (see capture.mjs).
const wire = { incoming: [], outgoing: [], badLines: [] };

// ------------------------------------------------------------------ the scenario
const summary = {
  ok: false,
  agentCommand: null,
  protocolVersion: null,
  agentInfo: null,
  sessionId: null,
  promptResponses: [],
  updates: {}, // sessionUpdate kind (state_update as "state:<state>") -> count, prompt turns
  toolCalls: {}, // toolCallId -> {name, title, kind, statuses: [...], output}
  toolCallStatuses: {}, // status -> count (all tool_call_update statuses seen in turns)
  permissionRequests: [],
  stopReasons: [],
  firstTurnText: "",
  secondTurnText: null,
  listed: null,
  replayed: {}, // kind -> count, updates replayed by session/resume
  replayedMessages: [], // [{kind, text}] for user_message / agent_message / agent_thought
  replayBeforeResponse: null,
  closeResult: null,
  wire: null,
  agentExit: null,
  failures,
};

const handled = { updates: [], permissions: [] };
let phase = "setup";

function kindOf(update) {
  return update.sessionUpdate === "state_update" ? `state:${update.state}` : update.sessionUpdate;
}

function textOf(content) {
  if (!content) return "";
  const blocks = Array.isArray(content) ? content : [content];
  return blocks.filter((b) => b && b.type === "text").map((b) => b.text).join("");
}

function recordTurnUpdate(update) {
  const kind = kindOf(update);
  summary.updates[kind] = (summary.updates[kind] ?? 0) + 1;
  if (update.sessionUpdate === "tool_call_update") {
    const call = (summary.toolCalls[update.toolCallId] ??= { name: null, title: null, kind: null, statuses: [] });
    for (const field of ["name", "title", "kind"]) {
      if (update[field] !== undefined && update[field] !== null) call[field] = update[field];
    }
    if (update.status) {
      call.statuses.push(update.status);
      summary.toolCallStatuses[update.status] = (summary.toolCallStatuses[update.status] ?? 0) + 1;
    }
    if (update.status === "failed" || update.status === "completed") {
      call.output = (update.content ?? []).map((c) => textOf(c?.content)).join("").slice(0, 500);
    }
  }
  if (update.sessionUpdate === "agent_message_chunk" && phase === "prompt1") {
    summary.firstTurnText += textOf(update.content);
  }
}

function buildClient() {
  return acp.client({ name: "term2acp-interop" })
    .onRequest("session/request_permission", async ({ params }) => {
      handled.permissions.push(params);
      const allow = params.options.find((o) => o.optionId === "allow-once")
        ?? params.options.find((o) => o.kind === "allow_once");
      summary.permissionRequests.push({
        phase,
        title: params.title,
        subjectType: params.subject?.type ?? null,
        toolCallId: params.subject?.toolCall?.toolCallId ?? null,
        options: params.options.map((o) => `${o.optionId}:${o.kind}`),
        answered: allow ? allow.optionId : "cancelled",
      });
      if (!allow) {
        fail(`permission request without an allow_once option: ${show(params.options)}`);
        return { outcome: { outcome: "cancelled" } };
      }
      return { outcome: { outcome: "selected", optionId: allow.optionId } };
    })
    .onNotification("session/update", ({ params }) => {
      handled.updates.push(params);
      if (phase === "resume") {
        const kind = kindOf(params.update);
        summary.replayed[kind] = (summary.replayed[kind] ?? 0) + 1;
        if (["user_message", "agent_message", "agent_thought"].includes(params.update.sessionUpdate)) {
          summary.replayedMessages.push({ kind: params.update.sessionUpdate, text: textOf(params.update.content) });
        }
      }
    });
}

async function runTurn(session, text, label) {
  phase = label;
  const response = await session.prompt(text);
  summary.promptResponses.push(response);
  const seen = [];
  for (;;) {
    const message = await session.nextUpdate();
    if (message.kind === "stop") {
      summary.stopReasons.push(message.stopReason ?? null);
      if (!message.stopReason) fail(`${label}: the idle state_update has no stopReason`);
      return seen;
    }
    seen.push(message.update);
    recordTurnUpdate(message.update);
  }
}

async function scenario(ctx, workspace) {
  // initialize
  const init = await ctx.request("initialize", {
    protocolVersion: acp.PROTOCOL_VERSION,
    info: { name: "term2acp-interop", title: "term2acp interop client", version: "1.0.0" },
    capabilities: {},
  });
  summary.protocolVersion = init.protocolVersion;
  summary.agentInfo = init.info;
  if (init.protocolVersion !== 2) fail(`initialize: protocolVersion ${init.protocolVersion}, expected 2`);
  if (!init.info || !init.info.name || !init.info.version) fail(`initialize: incomplete info ${show(init.info)}`);

  // session/new + two prompt turns through the ActiveSession helpers
  const session = await ctx.buildSession(workspace).start();
  summary.sessionId = session.sessionId;
  const firstTurn = await runTurn(session, FIRST_PROMPT, "prompt1");
  const ack = firstTurn.find((u) => u.sessionUpdate === "user_message");
  if (!ack || textOf(ack.content) !== FIRST_PROMPT) fail(`prompt1: no user_message echoing the prompt`);

  phase = "prompt2";
  const promptDone = session.prompt(SECOND_PROMPT);
  summary.secondTurnText = await session.readText();
  summary.promptResponses.push(await promptDone);
  session.dispose();

  // session/list
  phase = "list";
  const listed = await ctx.request("session/list", { cwd: workspace });
  const mine = listed.sessions.find((s) => s.sessionId === session.sessionId);
  summary.listed = { count: listed.sessions.length, found: Boolean(mine), title: mine?.title ?? null, cwd: mine?.cwd ?? null };
  if (!mine) fail(`session/list: ${session.sessionId} is not listed`);

  // session/resume with a replay from the start
  phase = "resume";
  const before = handled.updates.length;
  const resumed = await ctx.request("session/resume", {
    sessionId: session.sessionId, cwd: workspace, replayFrom: { type: "start" },
  });
  // Replayed updates must all arrive before the response (they are handled in order).
  summary.replayBeforeResponse = handled.updates.length - before;
  if (typeof resumed !== "object" || resumed === null) fail(`session/resume: result ${show(resumed)}`);

  // session/close
  phase = "close";
  summary.closeResult = await ctx.request("session/close", { sessionId: session.sessionId });
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

function checkWire() {
  // Error responses our SDK client wrote back (e.g. -32602 for invalid permission params).
  for (const message of wire.outgoing) {
    if (message && "error" in message) fail(`the SDK client answered the agent with an error: ${show(message)}`);
  }
  for (const message of wire.incoming) {
    if (message && "error" in message && !("method" in message)) {
      fail(`error response from the agent: ${show(message)}`);
    }
  }
  for (const line of wire.badLines) fail(`non-JSON line on the agent's stdout: ${line}`);

  const rawUpdates = wire.incoming.filter((m) => m && m.method === "session/update" && !("id" in m));
  if (rawUpdates.length !== handled.updates.length) {
    fail(`${rawUpdates.length} session/update notifications on the wire, ${handled.updates.length} `
      + "passed the SDK's validation (the rest were dropped)");
  } else {
    rawUpdates.forEach((m, i) => losses(m.params, handled.updates[i], "session/update").forEach(fail));
  }
  const rawPermissions = wire.incoming.filter((m) => m && m.method === "session/request_permission" && "id" in m);
  if (rawPermissions.length !== handled.permissions.length) {
    fail(`${rawPermissions.length} permission requests on the wire, ${handled.permissions.length} reached the handler`);
  } else {
    rawPermissions.forEach((m, i) => losses(m.params, handled.permissions[i], "request_permission").forEach(fail));
  }
  const byKind = {};
  for (const m of wire.incoming) {
    const kind = "method" in m ? ("id" in m ? `request:${m.method}` : `notification:${m.method}`) : "response";
    byKind[kind] = (byKind[kind] ?? 0) + 1;
  }
  summary.wire = { incoming: wire.incoming.length, outgoing: wire.outgoing.length, byKind };
}

async function main() {
  let options;
  try {
    options = parseArgs(process.argv.slice(2));
  } catch (error) {
    stderrWrite(`client.mjs: ${error.message}`);
    process.exit(2);
  }
  summary.agentCommand = options.command;
  const watchdog = setTimeout(() => {
    fail(`timed out after ${options.timeoutMs} ms in phase ${phase}`);
    finish(child, 3);
  }, options.timeoutMs);

  const child = spawn(options.command[0], options.command.slice(1), {
    stdio: ["pipe", "pipe", "inherit"],
    env: process.env,
  });
  child.on("error", (error) => fail(`cannot start the agent: ${show(error)}`));

  try {
    await buildClient().connectWith(tappedStream(child, wire, acp.ndJsonStream), (ctx) => scenario(ctx, options.workspace));
  } catch (error) {
    fail(`in phase ${phase}: ${show(error)}${error?.stack ? "\n" + error.stack : ""}`);
  }
  phase = "shutdown";
  try {
    child.stdin.end();
  } catch (error) {
    fail(`closing the agent's stdin: ${show(error)}`);
  }
  summary.agentExit = await waitExit(child, 10000);
  if (summary.agentExit.code !== 0) fail(`the agent exited with ${show(summary.agentExit)}`);
  clearTimeout(watchdog);
  // let late rejections / console output surface before judging
  await new Promise((resolve) => setTimeout(resolve, 50));
  finish(child, 1);
}

let finished = false;
function finish(child, failureCode) {
  if (finished) return;
  finished = true;
  checkWire();
  if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  summary.ok = failures.length === 0;
  process.stdout.write(JSON.stringify(summary) + "\n");
  if (!summary.ok) {
    stderrWrite(`client.mjs: FAILED\n  - ${failures.join("\n  - ")}`);
  }
  process.exitCode = summary.ok ? 0 : failureCode;
  // Do not wait for dangling handles (a wedged stream must not keep us alive).
  setTimeout(() => process.exit(process.exitCode), 100).unref();
}

main();
