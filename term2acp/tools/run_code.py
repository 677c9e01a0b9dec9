"""The ``run_code`` tool: a Python snippet in the shell sandbox, with nested tool calls.

The snippet runs under the host's Python (read-only, like everything outside the session
root) through a small bootstrap. Its ``tools`` object sends each call as one JSON line
over an inherited socket (one end of a socketpair, passed into the sandbox as a file
descriptor); a greenlet in the agent answers it through ``ctx.run_tool`` and writes back
the result text or the error, which the bootstrap raises as ``ToolCallError``.
"""

import json
import logging
import socket
import sys

from gevent.pool import Group
from marshmallow import Schema, fields, validate

from term2acp.core.nesting import MAX_ARGUMENT_CHARS
from term2acp.tools.base import Tool, ToolError, ToolResult
from term2acp.tools.shell import effective_timeout, execute, require_sandbox

log = logging.getLogger(__name__)

MAX_CALLS = 200
MAX_LINE = MAX_ARGUMENT_CHARS + 64 * 1024  # largest request line accepted from the snippet
REFUSED = frozenset({"shell", "bash", "run_code", "run_subagent", "enter_worktree",
                     "exit_worktree", "ask_mentor", "session_rollover"})

BOOTSTRAP = r'''
import json, socket, sys, threading

class ToolCallError(Exception):
    """A nested tool call failed; the message says why."""

_socket = socket.socket(fileno=int(sys.argv[1]))
_socket.setblocking(True)  # the agent's end of the pair is gevent's: non-blocking
_channel = _socket.makefile("rwb")

_lock = threading.Lock()  # one request/reply at a time, even from snippet threads

def _call(name, arguments):
    with _lock:
        _channel.write(json.dumps({"name": name, "arguments": arguments}).encode() + b"\n")
        _channel.flush()
        line = _channel.readline()
    if not line:
        raise ToolCallError("the agent closed the tool channel")
    reply = json.loads(line)
    if reply.get("ok"):
        return reply.get("text", "")
    raise ToolCallError(reply.get("error") or "tool call failed")

class Tools:
    """tools.NAME(**arguments) or tools.call(NAME, {arguments}) runs an agent tool."""

    def call(self, name, arguments=None, **kwargs):
        merged = dict(arguments or {})
        merged.update(kwargs)
        return _call(name, merged)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda arguments=None, **kwargs: self.call(name, arguments, **kwargs)

_code = json.loads(_channel.readline())["code"]
sys.argv = ["run_code"]
_globals = {"__name__": "__main__", "tools": Tools(), "ToolCallError": ToolCallError}
try:
    exec(compile(_code, "<run_code>", "exec"), _globals)
except SystemExit:
    raise
except BaseException:
    import traceback
    _type, _value, _tb = sys.exc_info()
    traceback.print_exception(_type, _value, _tb.tb_next)  # hide this bootstrap's frame
    sys.exit(1)
'''


class RunCodeParams(Schema):
    code = fields.String(required=True, validate=validate.Length(min=1),
                         metadata={"description": "Python 3 source to run."})
    timeout = fields.Float(validate=validate.Range(min=0, min_inclusive=False),
                           metadata={"description": "Seconds before the run is killed."})


class RunCodeTool(Tool):
    name = "run_code"
    kind = "execute"
    Params = RunCodeParams
    description = (
        "Run a Python 3 snippet in the same sandbox as the shell tool (working directory "
        "writable, everything else read-only, no network). The global `tools` calls agent "
        "tools: `tools.read_file(path='x.py')` returns the tool's text or raises "
        f"`ToolCallError`. At most {MAX_CALLS} tool calls per run; shell and run_code "
        "cannot be called. Returns the printed output and the exit code.")

    def title(self, args):
        return "run_code"

    def approval(self, args, ctx):
        return None  # itself needs no approval; nested calls ask through their own tools

    def run(self, args, ctx):
        require_sandbox()
        timeout = effective_timeout(args.get("timeout"), ctx.settings)
        ours, theirs = socket.socketpair()
        helpers = Group()
        try:
            theirs.set_inheritable(True)
            helpers.spawn(_serve, ours, args["code"], ctx)
            argv = [sys.executable, "-u", "-E", "-s", "-c", BOOTSTRAP, str(theirs.fileno())]
            return execute(ctx, argv, _label(args["code"]), timeout, (theirs.fileno(),))
        finally:
            theirs.close()
            try:  # a second kill (a session closed during a cancel) may cut the wait short
                helpers.kill(block=True, timeout=1)
            finally:
                ours.close()


def _label(code):
    lines = code.strip().splitlines()
    first = lines[0][:80] if lines else ""
    return f"python3 <run_code: {first}{' …' if len(lines) > 1 else ''}>"


def _serve(sock, code, ctx):
    """Send the code, then answer nested call requests until the snippet hangs up."""
    channel = sock.makefile("rwb")
    calls = 0
    try:
        _send(channel, {"code": code})
        while True:
            line = channel.readline(MAX_LINE)
            if not line:
                return
            if not line.endswith(b"\n"):
                _send(channel, {"ok": False, "error": "tool call request too large"})
                return
            calls += 1
            _send(channel, _answer(line, ctx, calls))
    except OSError as exc:
        log.debug("run_code channel closed: %s", exc)
    finally:
        channel.close()


def _answer(line, ctx, calls):
    """One reply: ``{"ok": True, "text": …}`` or ``{"ok": False, "error": …}``."""
    try:
        request = json.loads(line)
        name, arguments = request["name"], request.get("arguments") or {}
        if not isinstance(name, str) or not isinstance(arguments, dict):
            raise ValueError
    except (ValueError, KeyError, TypeError):
        return {"ok": False, "error": "malformed tool call request"}
    if calls > MAX_CALLS:
        return {"ok": False, "error": f"run_code allows at most {MAX_CALLS} tool calls per run"}
    if name in REFUSED:
        return {"ok": False, "error": f"{name} cannot be called from run_code"}
    try:
        result = ctx.run_tool(name, arguments)
    except ToolError as exc:
        return {"ok": False, "error": str(exc)}
    except Exception as exc:  # noqa: BLE001 - the snippet gets an error, the agent goes on
        log.exception("nested %s call failed", name)
        return {"ok": False, "error": f"{name} failed: {exc}"}
    if isinstance(result, ToolResult):
        return {"ok": not result.is_error, "text": result.text, "error": result.text}
    return {"ok": True, "text": "" if result is None else str(result)}


def _send(channel, message):
    channel.write(json.dumps(message).encode() + b"\n")
    channel.flush()
