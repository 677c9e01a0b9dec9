"""The ``shell`` tool: one command in the sandbox, its output streamed as a terminal.

Every command runs sandboxed (see ``sandbox/bwrap.py``): a requested
``sandbox: "unsandboxed"`` is silently downgraded, and when the sandbox is unavailable the
call fails without running anything. Since the sandbox confines writes to the session
root, no approval is asked.

``execute`` is shared with ``run_code``: it reports the terminal (started, output chunks,
exited), keeps only a bounded head and tail of the output for the model, and turns the
exit into a :class:`ToolResult`.
"""

import logging
import os
import uuid

from marshmallow import Schema, fields, validate

from term2acp import sandbox
from term2acp.core.events import TerminalExited, TerminalOutput, TerminalStarted
from term2acp.tools.base import Tool, ToolError, ToolResult

log = logging.getLogger(__name__)

DISPLAY_CAP = 16 * 1024 * 1024  # bytes of output streamed to the editor per command
SHELL = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"


class ShellParams(Schema):
    command = fields.String(required=True, validate=validate.Length(min=1),
                            metadata={"description": "The shell command line to run."})
    timeout = fields.Float(validate=validate.Range(min=0, min_inclusive=False),
                           metadata={"description": "Seconds before the command is killed "
                                                    "(default from settings, capped)."})
    sandbox = fields.String(metadata={"description": "Ignored: commands always run in the "
                                                     "sandbox."})


class ShellTool(Tool):
    name = "shell"
    kind = "execute"
    Params = ShellParams
    description = (
        "Run a shell command in the session's working directory, inside a sandbox: the "
        "working directory is writable; the system directories and the toolchains in the "
        "home directory are read-only; the rest of the home, other projects and "
        "credentials are not visible; /tmp and $HOME are private and small; memory is "
        "limited; network access is off unless configured. Returns the combined "
        "stdout/stderr (long output keeps its head and tail) and the exit code.")

    def title(self, args):
        command = (args.get("command") or "").strip().splitlines()
        return command[0][:120] if command else self.name

    def approval(self, args, ctx):
        return None  # sandboxed (or refused): never needs a human

    def run(self, args, ctx):
        timeout = effective_timeout(args.get("timeout"), ctx.settings)
        return execute(ctx, [SHELL, "-c", args["command"]], args["command"], timeout)


def effective_timeout(requested, settings):
    """The requested timeout, else the default, never above ``max_timeout``."""
    value = settings.shell.timeout if requested is None else float(requested)
    return min(value, settings.shell.max_timeout)


def require_sandbox():
    """Raise ToolError (nothing runs) when the sandbox is unavailable."""
    availability = sandbox.probe()
    if not availability.available:
        raise ToolError(f"Shell sandbox unavailable: {availability.reason}. The command was "
                        "not run; commands never run unsandboxed in this session.")


def execute(ctx, argv, label, timeout, pass_fds=()):
    """Run ``argv`` sandboxed in ``ctx.root`` as a reported terminal; a ToolResult."""
    require_sandbox()
    try:
        sandbox.check_root(ctx.root)
    except sandbox.Refused as exc:
        raise ToolError(f"Shell refused: {exc}. The command was not run.") from None
    terminal_id = f"term-{uuid.uuid4().hex[:16]}"
    capture = Capture(ctx.settings.shell.output_cap)
    stream = _Stream(ctx, terminal_id, capture)
    ctx.emit(TerminalStarted(terminal_id=terminal_id, command=label, cwd=ctx.root,
                             call_id=ctx.call_id))
    outcome, timed_out = sandbox.Exit(None, "SIGKILL"), False  # as reported if cancelled
    try:
        outcome = sandbox.run(argv, ctx.root, ctx.settings, stream.write, timeout, pass_fds)
    except sandbox.ProcessTimeout as exc:
        outcome, timed_out = exc.exit, True
    except sandbox.Refused as exc:  # checked above; kept so no bwrap error can surface
        raise ToolError(f"Shell refused: {exc}. The command was not run.") from None
    except sandbox.SandboxUnavailable as exc:
        raise ToolError(f"Shell sandbox unavailable: {exc}. The command was not run.") from None
    except sandbox.LaunchError as exc:
        raise ToolError(f"The command could not be started: {exc.strerror}") from None
    finally:
        _emit_quietly(ctx, TerminalExited(terminal_id=terminal_id,
                                          exit_code=outcome.exit_code, signal=outcome.signal))
    return _result(terminal_id, capture, outcome, timed_out, timeout)


def _result(terminal_id, capture, outcome, timed_out, timeout):
    if outcome.exit_code is not None:
        status = f"exit code {outcome.exit_code}"
    else:
        status = f"killed by signal {outcome.signal}"
    parts = [capture.text().rstrip("\n")] if capture.total else []
    if timed_out:
        parts.append(f"Command timed out after {timeout:g}s; the process tree was killed.")
    parts.append(status)
    return ToolResult(
        text="\n".join(parts),
        is_error=timed_out or outcome.exit_code != 0,
        content=[{"type": "terminal", "terminal_id": terminal_id}],
        raw_output={"exitCode": outcome.exit_code, "signal": outcome.signal},
    )


class _Stream:
    """Feeds the capture and streams chunks to the editor up to DISPLAY_CAP bytes."""

    def __init__(self, ctx, terminal_id, capture):
        self.ctx, self.terminal_id, self.capture = ctx, terminal_id, capture
        self.shown = 0

    def write(self, data):
        self.capture.add(data)
        if self.shown >= DISPLAY_CAP:
            return
        room = DISPLAY_CAP - self.shown
        chunk = data[:room]
        self.shown += len(chunk)
        if self.shown >= DISPLAY_CAP:
            chunk += b"\n[term2acp: further output is not displayed]\n"
        self.ctx.emit(TerminalOutput(terminal_id=self.terminal_id, data=chunk))


class Capture:
    """The first and last ``cap`` / 2 bytes of a stream and its total size: bounded."""

    def __init__(self, cap):
        self.cap = max(int(cap), 2)
        self.head_room = self.cap // 2
        self.tail_room = self.cap - self.head_room
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data):
        self.total += len(data)
        if len(self.head) < self.head_room:
            take = self.head_room - len(self.head)
            self.head += data[:take]
            data = data[take:]
        if data:
            self.tail += data
            if len(self.tail) > self.tail_room:
                del self.tail[:len(self.tail) - self.tail_room]

    def text(self):
        """Decoded output; when cut, a line in the middle says how much is missing."""
        head = self.head.decode("utf-8", "replace")
        tail = self.tail.decode("utf-8", "replace")
        cut = self.total - len(self.head) - len(self.tail)
        if cut <= 0:
            return head + tail
        return (f"{head}\n[... {cut:,} bytes of output cut; showing the first "
                f"{len(self.head):,} and the last {len(self.tail):,} bytes ...]\n{tail}")


def _emit_quietly(ctx, event):
    try:
        ctx.emit(event)
    except Exception:  # noqa: BLE001 - reporting must not mask the real outcome
        log.exception("could not report %s", type(event).__name__)
