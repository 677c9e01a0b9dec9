"""term2acp exec: one prompt, no editor.

Usage:
  term2acp exec [options] [--allow <pattern>]... [<prompt>]
  term2acp exec -h | --help

Options:
  --json                 One JSON object a line on stdout and nothing else: the session's
                         updates (ACP v2 session/update payloads), one event per permission
                         decision, and last the result.
  --mode <mode>          Session mode: read-only, plan, ask or auto.
  --allow <pattern>      Allow what a question asks when it matches TOOL or TOOL:GLOB (the
                         path relative to the root for file tools, the command line for
                         shell, the host for web_fetch); repeatable. Anything else is refused.
  --max-turns <n>        At most n model requests.
  --max-cost <usd>       No model request once the run's cost passes this many US dollars.
  --session <id>         Continue a stored session (one open elsewhere is taken over).
  --cwd <dir>            The project directory (the session root) [default: .].
  --provider <provider>  Model provider (as for the editor agent).
  --model <model>        Model id or <provider>/<model>.
  --effort <effort>      Reasoning effort.
  -h --help              Show this help.

The prompt is the argument, else standard input (also with "-"). Without --json the answer
goes to stdout and tool calls and decisions to stderr as short lines. Ctrl-C or SIGTERM
cancels the turn, as session/cancel does, and still prints the result. Exit status: 0 the
turn ended, 1 an error of the provider or the agent, 2 bad usage, 3 the model refused, 4
max_tokens, 5 --max-turns reached, 6 --max-cost reached, 130 cancelled.
"""

import json
import os
import signal
import sys
import time

import gevent
from gevent.event import AsyncResult

from term2acp.core.option_values import EFFORTS, MODE_IDS
from term2acp.headless import allow
from term2acp.headless.agent import INITIALIZE, AgentError, LocalAgent

EXIT = {"end_turn": 0, "error": 1, "refusal": 3, "max_tokens": 4, "max_turn_requests": 5,
        "max_cost": 6, "cancelled": 130}
USAGE = 2
OWN_STOPS = {"_term2_error": "error", "_term2_max_cost": "max_cost"}
CANCEL_WAIT = 30.0  # seconds the turn has to end after a cancel


class UsageError(Exception):
    pass


def parse(argv):
    from docopt import DocoptExit, docopt

    try:
        opts = docopt(__doc__, argv=["exec", *argv], default_help=False)
    except DocoptExit as exc:
        raise UsageError(str(exc).splitlines()[0] or "invalid arguments") from None
    if opts["--help"]:
        return None
    if opts["--mode"] is not None and opts["--mode"] not in MODE_IDS:
        raise UsageError(f"--mode must be one of: {', '.join(MODE_IDS)}")
    if opts["--effort"] is not None and opts["--effort"] not in EFFORTS:
        raise UsageError(f"--effort must be one of: {', '.join(EFFORTS)}")
    for flag, kind in (("--max-turns", int), ("--max-cost", float)):
        if opts[flag] is not None:
            try:
                opts[flag] = kind(opts[flag])
            except ValueError:
                raise UsageError(f"{flag} must be a number") from None
            if opts[flag] < (1 if kind is int else 0):
                raise UsageError(f"{flag} must be {'positive' if kind is int else '>= 0'}")
    try:
        opts["rules"] = allow.parse(opts["--allow"])
    except allow.PatternError as exc:
        raise UsageError(str(exc)) from None
    root = os.path.realpath(opts["--cwd"])
    if not os.path.isdir(root):
        raise UsageError(f"--cwd {opts['--cwd']}: not a directory")
    opts["root"] = root
    return opts


def read_prompt(opts, stdin):
    text = opts["<prompt>"]
    if text is None or text == "-":
        if text is None and stdin.isatty():
            raise UsageError("no prompt: give it as the argument or on standard input")
        text = stdin.read()
    if not text.strip():
        raise UsageError("no prompt: give it as the argument or on standard input")
    return text


def main(argv, load):
    """``load(flags)`` -> ``(settings, catalog)`` (``cli.load``); returns the exit status."""
    try:
        opts = parse(argv)
        if opts is None:
            sys.stdout.write(__doc__.lstrip())
            return 0
        prompt = read_prompt(opts, sys.stdin)
    except UsageError as exc:
        sys.stderr.write(f"term2acp exec: {exc}\n")
        return USAGE
    flags = {"provider": opts["--provider"], "model": opts["--model"],
             "effort": opts["--effort"], "max_turn_requests": opts["--max-turns"],
             "max_cost": opts["--max-cost"],
             "report_runs": True}  # the idle update says the turn's requests and cost
    try:
        settings, catalog = load(flags)
    except Exception as exc:  # noqa: BLE001 - cli.StartError: the message says what to fix
        sys.stderr.write(f"term2acp exec: {exc}\n")
        return EXIT["error"]
    problem = limits(settings, opts)
    if problem:
        sys.stderr.write(f"term2acp exec: {problem}\n")
        return USAGE
    out = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)  # a stray print or a library's banner lands on stderr, never in the output
    try:
        return Run(opts, settings, catalog, out, sys.stderr).run(prompt)
    finally:
        out.close()


def limits(settings, opts):
    """The problem with --max-cost (loaded as ``max_cost``), or None."""
    if opts["--max-cost"] is not None:
        from term2acp.providers.prices import price_of

        if settings.provider != "scripted" and price_of(settings.model, settings.prices) is None:
            return (f"--max-cost: the model {settings.model} has no price (give it one in the "
                    "config file's [prices] table)")
    return None


class Run:
    def __init__(self, opts, settings, catalog, out, err):
        self.opts = opts
        self.settings = settings
        self.catalog = catalog
        self.out = out
        self.err = err
        self.json = opts["--json"]
        self.session_id = opts["--session"]
        self.idle = AsyncResult()
        self.prompting = False
        self.cancelled = False
        self.cancel_sent = False
        self.open_line = False  # the answer on stdout did not end its line yet
        self.titles = {}  # tool call id -> title

    def run(self, prompt):
        started = time.monotonic()
        agent = LocalAgent(self.settings, self.catalog, self.on_update, self.on_request,
                           on_closed=lambda: self.idle.ready() or self.idle.set(None))
        self.agent_notify = agent.notify
        handlers = [gevent.signal_handler(signum, self.interrupt)
                    for signum in (signal.SIGINT, signal.SIGTERM)]
        # an editor that opens this session asks this process to let it go, as it would ask
        # an agent (sessions/takeover.py); without the handler SIGUSR2 would end it
        handlers.append(gevent.signal_handler(signal.SIGUSR2, agent.server.yield_sessions))
        try:
            update, error = self.converse(agent, prompt)
        finally:
            for handler in handlers:
                handler.cancel()
            agent.close(self.settings.shutdown_timeout + 5)
        return self.finish(update, error, started)

    def converse(self, agent, prompt):
        """The session's one prompt; ``(idle update, error)``."""
        try:
            agent.request("initialize", INITIALIZE)
            root = self.opts["root"]
            if self.session_id:
                agent.request("session/resume", {"sessionId": self.session_id, "cwd": root})
            else:
                self.session_id = agent.request("session/new", {"cwd": root})["sessionId"]
            if self.opts["--mode"]:
                agent.request("session/set_config_option", {
                    "sessionId": self.session_id, "configId": "mode",
                    "value": self.opts["--mode"]})
            if self.cancelled:
                return None, None
            self.prompting = True
            agent.request("session/prompt", {"sessionId": self.session_id,
                                             "prompt": [{"type": "text", "text": prompt}]})
            if self.cancelled:  # a signal while the prompt was on its way
                gevent.spawn(self._cancel)
            update = self.idle.get()
            if update is None and not self.cancelled:
                return None, "the agent closed the connection"
            return update, None
        except AgentError as exc:
            return None, str(exc)

    # ------------------------------------------------------------ from the agent
    def on_update(self, params):
        update = params.get("update") or {}
        kind = update.get("sessionUpdate")
        if self.json:
            self.emit(params)
        else:
            self.show(kind, update)
        if self.prompting and kind == "state_update" and update.get("state") == "idle":
            self.idle.set(update)

    def on_request(self, method, params):
        if method != "session/request_permission":
            return None  # nobody to ask: the agent takes that as a refusal
        option, rule = allow.decide(self.opts["rules"], params, self.opts["root"])
        decision = option.get("optionId") if option else None
        kind = option.get("kind") if option else "cancelled"
        event = {"type": "permission", "sessionId": params.get("sessionId"),
                 "question": params.get("title"), "description": params.get("description"),
                 "toolCallId": ((params.get("subject") or {}).get("toolCall") or {}
                                ).get("toolCallId"),
                 "options": params.get("options") or [], "decision": decision,
                 "kind": kind, "rule": rule or "no --allow pattern matched: refused"}
        if self.json:
            self.emit(event)
        else:
            verdict = f"allowed by --allow {rule}" if rule else "refused (no --allow matched)"
            self.note(f"? {params.get('title')}: {verdict}")
        if option is None:
            return {"outcome": {"outcome": "cancelled"}}
        return {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}

    def interrupt(self):
        if self.cancelled:  # a second signal: stop waiting
            if not self.idle.ready():
                self.idle.set(None)
            return
        self.cancelled = True
        if self.prompting and self.session_id:
            gevent.spawn(self._cancel)

    def _cancel(self):
        if self.cancel_sent:
            return
        self.cancel_sent = True
        self.agent_notify("session/cancel", {"sessionId": self.session_id})
        if not self.idle.wait(CANCEL_WAIT):
            self.idle.set(None)

    agent_notify = None  # set in run(): LocalAgent.notify

    # ------------------------------------------------------------ output
    def emit(self, obj):
        self.out.write(json.dumps(obj, ensure_ascii=False) + "\n")

    def note(self, text):
        if self.open_line:
            self.out.flush()
        self.err.write(text + "\n")
        self.err.flush()

    def show(self, kind, update):
        if kind == "agent_message_chunk" and self.prompting:
            text = (update.get("content") or {}).get("text") or ""
            if text:
                self.out.write(text)
                self.open_line = not text.endswith("\n")
        elif kind == "tool_call_update":
            call = update.get("toolCallId")
            if update.get("title"):
                self.titles[call] = update["title"]
            status = update.get("status")
            if status in ("pending", "completed", "failed", "cancelled"):
                self.note(f"- {self.titles.get(call, call)}: {status}")

    def finish(self, update, error, started):
        """The result: its event (or stderr line), and the exit status."""
        meta = ((update or {}).get("_meta") or {}).get("term2") or {}
        if update is None:
            reason = "cancelled" if self.cancelled and error is None else "error"
        else:
            reason = OWN_STOPS.get(update.get("stopReason"), update.get("stopReason"))
        error = error or meta.get("error")
        usage = (update or {}).get("usage") or {}
        code = EXIT.get(reason, 1)
        result = {"type": "result", "sessionId": self.session_id, "stopReason": reason,
                  "usage": {"input": usage.get("inputTokens", 0),
                            "output": usage.get("outputTokens", 0),
                            "cached": usage.get("cachedReadTokens", 0)},
                  "costUsd": meta.get("cost", 0.0), "modelRequests": meta.get("requests", 0),
                  "durationMs": round((time.monotonic() - started) * 1000, 1),
                  "exitCode": code}
        if error:
            result["error"] = error
        if self.json:
            self.emit(result)
        else:
            if self.open_line:
                self.out.write("\n")
            self.out.flush()
            if reason != "end_turn" or error:
                self.note(f"term2acp exec: {reason}" + (f": {error}" if error else ""))
            if self.session_id:
                self.note(f"session {self.session_id}")
        return code
