// What both interop clients (client.mjs: v2, client_v1.mjs: v1) share: failure capture,
// argument parsing, the wire taps and the "what did the SDK drop" comparison.
//
// Importing this module installs the capture: console.error/console.warn output (the SDK
// logs dropped notifications that way), unhandled rejections and uncaught exceptions all
// become failures.

import path from "node:path";
import { Readable, Writable } from "node:stream";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));

// ------------------------------------------------------------------ failure capture
export const failures = [];
export const fail = (what) => failures.push(String(what));
export const stderrWrite = (text) => process.stderr.write(text.endsWith("\n") ? text : text + "\n");
export const show = (value) => {
  if (value instanceof Error) return `${value.name}: ${value.message}${value.data !== undefined ? " " + JSON.stringify(value.data) : ""}`;
  if (typeof value === "string") return value;
  try {
    return JSON.stringify(value);
  } catch {
    return String(value);
  }
};
for (const level of ["error", "warn"]) {
  const original = console[level].bind(console);
  console[level] = (...args) => {
    fail(`console.${level}: ${args.map(show).join(" ")}`.slice(0, 2000));
    original(...args);
  };
}
process.on("unhandledRejection", (reason) => fail(`unhandled rejection: ${show(reason)}`));
process.on("uncaughtException", (error) => fail(`uncaught exception: ${show(error)}`));

// ------------------------------------------------------------------ arguments
// `--workspace DIR` plus one `--<name> DIR` per entry of `dirs` (all absolute, required),
// `--timeout-ms N`, and the agent command after `--` (else $TERM2ACP_INTEROP_AGENT as a
// JSON array, else <repo>/bin/term2-acp --provider scripted).
export function parseArgs(argv, dirs = []) {
  const required = ["workspace", ...dirs];
  const options = { timeoutMs: 60000, command: null };
  for (const key of required) options[key] = null;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--") {
      options.command = argv.slice(i + 1);
      break;
    } else if (arg === "--timeout-ms") {
      options.timeoutMs = Number(argv[++i]);
    } else if (arg.startsWith("--") && required.includes(arg.slice(2))) {
      options[arg.slice(2)] = argv[++i];
    } else {
      throw new Error(`unknown argument ${arg}`);
    }
  }
  if (!options.command || options.command.length === 0) {
    options.command = process.env.TERM2ACP_INTEROP_AGENT
      ? JSON.parse(process.env.TERM2ACP_INTEROP_AGENT)
      : [path.resolve(HERE, "..", "..", "bin", "term2-acp"), "--provider", "scripted"];
  }
  for (const key of required) {
    if (!options[key] || !path.isAbsolute(options[key])) throw new Error(`--${key} /absolute/dir is required`);
  }
  return options;
}

// ------------------------------------------------------------------ wire taps
// `wire` ({incoming, outgoing, badLines}) keeps every raw message in both directions so
// that what the SDK handed to our handlers can be compared with what was on the line, and
// every line of the agent's stdout that is not JSON. `ndJsonStream` is the SDK version's own.
export function tappedStream(child, wire, ndJsonStream) {
  const decoder = new TextDecoder();
  let pending = "";
  const check = (line) => {
    if (!line.trim()) return;
    try {
      JSON.parse(line);
    } catch {
      wire.badLines.push(line.slice(0, 300));
    }
  };
  const checker = new TransformStream({
    transform(chunk, controller) {
      pending += decoder.decode(chunk, { stream: true });
      const lines = pending.split("\n");
      pending = lines.pop();
      lines.forEach(check);
      controller.enqueue(chunk);
    },
    flush() {
      check(pending);
    },
  });
  const stdout = Readable.toWeb(child.stdout).pipeThrough(checker);
  const base = ndJsonStream(Writable.toWeb(child.stdin), stdout);
  const readable = base.readable.pipeThrough(new TransformStream({
    transform(message, controller) {
      for (const item of Array.isArray(message) ? message : [message]) wire.incoming.push(item);
      controller.enqueue(message);
    },
  }));
  const writer = base.writable.getWriter();
  const writable = new WritableStream({
    write(message) {
      for (const item of Array.isArray(message) ? message : [message]) wire.outgoing.push(item);
      return writer.write(message);
    },
    close() {
      return writer.close();
    },
    abort(reason) {
      return writer.abort(reason);
    },
  });
  return { readable, writable };
}

// Paths present in `raw` that are missing from, or differ in, the SDK-parsed value.
export function losses(raw, parsed, where = "") {
  if (raw === null || typeof raw !== "object") {
    return Object.is(raw, parsed) ? [] : [`${where || "."}: ${show(raw)} became ${show(parsed)}`];
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(raw) !== Array.isArray(parsed)) {
    return [`${where || "."}: ${show(raw).slice(0, 200)} became ${show(parsed).slice(0, 200)}`];
  }
  const out = [];
  if (Array.isArray(raw) && raw.length !== parsed.length) out.push(`${where}: ${raw.length} items became ${parsed.length}`);
  for (const key of Object.keys(raw)) {
    if (!(key in parsed)) out.push(`${where}.${key}: dropped by the SDK (was ${show(raw[key]).slice(0, 200)})`);
    else out.push(...losses(raw[key], parsed[key], `${where}.${key}`));
  }
  return out;
}
