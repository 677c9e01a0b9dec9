"""The ``shell`` tool: one command in the sandbox, its output streamed as a terminal.

Every command runs sandboxed (see ``sandbox/bwrap.py``); when the sandbox is unavailable
the call fails without running anything. Since the sandbox confines writes to the session
root, no approval is asked, but for the host network (``network: true``) and in ask mode
(``tools/shell_policy.py``). The commands of a session share a private loopback
(``sandbox/loopback.py``), so a server started with ``background: true``
(``tools/processes.py``) is reached by the next call; ``tty: true`` runs the command on a
pseudo-terminal.

``execute`` is shared with ``run_code``: it reports the terminal (started, output chunks,
exited), keeps only a bounded head and tail of the output for the model
(``tools/output.py``), and turns the exit into a :class:`ToolResult`. Its ``network``
argument is the sandbox's (``bwrap.run``): True runs the command on the host's network.
"""

import logging
import os
import uuid

from marshmallow import Schema, fields, validate

from term2acp import sandbox
from term2acp.core.events import TerminalExited, TerminalStarted
from term2acp.tools import processes, shell_policy
from term2acp.tools.base import Tool, ToolError, ToolResult
from term2acp.tools.output import DISPLAY_CAP, Capture, TerminalStream, emit_quietly

log = logging.getLogger(__name__)

__all__ = ["DISPLAY_CAP", "Capture", "ShellTool", "effective_timeout", "execute",
           "require_sandbox"]

SHELL = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
WAITING_HINT = ("If it was waiting for input, or is meant to keep running (a server, a "
                "watcher, a REPL), run it with background: true (and tty: true for prompts) "
                "and answer it with shell_output's input.")


class ShellParams(Schema):
    command = fields.String(required=True, validate=validate.Length(min=1),
                            metadata={"description": "The shell command line to run."})
    timeout = fields.Float(validate=validate.Range(min=0, min_inclusive=False),
                           metadata={"description": "Seconds before the command is killed "
                                                    "(default from settings, capped). Not "
                                                    "for background commands."})
    background = fields.Boolean(metadata={"description": (
        "Start the command and return at once with a process_id; it keeps running (a dev "
        "server, a watcher) until shell_kill, the end of the session or of the agent. Read "
        "it with shell_output. Later commands reach its ports on 127.0.0.1.")})
    tty = fields.Boolean(metadata={"description": (
        "Run on a pseudo-terminal: prompts, colours and REPLs behave as in a terminal. "
        "With background, shell_output's input types into it.")})
    wait_seconds = fields.Float(validate=validate.Range(min=0, max=processes.MAX_WAIT),
                                metadata={"description": (
                                    "With background: wait up to this long before "
                                    "returning: until it exits, or until its output has "
                                    "come and paused for half a second (default 0).")})
    network = fields.Boolean(metadata={"description": shell_policy.NETWORK_DESCRIPTION})


class ShellTool(Tool):
    name = "shell"
    kind = "execute"
    Params = ShellParams
    description = (
        "Run a shell command in the session's working directory, inside a sandbox: the "
        "working directory is writable; the system directories and the toolchains in the "
        "home directory are read-only; the rest of the home, other projects and "
        "credentials are not visible; /tmp and $HOME are private and small; memory is "
        "limited; there is no network unless you set network: true (the user is asked; the "
        "session's commands share a private loopback). Returns the combined stdout/stderr (long output keeps its head "
        "and tail) and the exit code. With background: true the command keeps running "
        "(use shell_output and shell_kill); stdin is empty unless background or tty.")

    def title(self, args):
        command = (args.get("command") or "").strip().splitlines()
        return command[0][:120] if command else self.name

    applies_ask_mode = True  # ask mode's questions are shell_policy's

    def approval(self, args, ctx):
        return shell_policy.check(args, ctx)  # the host network, ask mode

    def run(self, args, ctx, plan=None):
        argv = [SHELL, "-c", args["command"]]
        network = True if plan is not None and plan.network else None  # None: [shell] network
        if args.get("background"):
            if args.get("timeout") is not None:
                raise ToolError("timeout does not apply to a background command (it runs "
                                "until shell_kill); use wait_seconds to wait for its first "
                                "output.")
            require_usable_root(ctx)
            return _started(ctx, argv, args, network)
        if args.get("wait_seconds") is not None:
            raise ToolError("wait_seconds applies to background commands only; use timeout "
                            "for a foreground command.")
        timeout = effective_timeout(args.get("timeout"), ctx.settings)
        result = execute(ctx, argv, args["command"], timeout, tty=bool(args.get("tty")),
                         network=network)
        return shell_policy.with_network_hint(result, network or ctx.settings.shell.network)


def _started(ctx, argv, args, network):
    try:
        return processes.start(ctx, argv, args["command"], bool(args.get("tty")),
                               args.get("wait_seconds") or 0, network=network)
    except sandbox.SandboxUnavailable as exc:
        raise ToolError(f"Shell sandbox unavailable: {exc}. The command was not run.") from None
    except sandbox.LoopbackError as exc:
        raise ToolError(f"The session's sandbox network could not be set up: {exc.strerror}. The "
                        "command was not run.") from None
    except sandbox.LaunchError as exc:
        raise ToolError(f"The command could not be started: {exc.strerror}") from None


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


def require_usable_root(ctx):
    """Raise ToolError (nothing runs) when the sandbox is unavailable or refuses the root."""
    require_sandbox()
    try:
        sandbox.check_root(ctx.root)
        for root in ctx.extra_roots:
            sandbox.check_root(root)
    except sandbox.Refused as exc:
        raise ToolError(f"Shell refused: {exc}. The command was not run.") from None


def execute(ctx, argv, label, timeout, pass_fds=(), network=None, tty=False):
    """Run ``argv`` sandboxed in ``ctx.root`` as a reported terminal; a ToolResult.
    ``network``: see ``sandbox.run`` (None: the ``[shell] network`` setting)."""
    require_usable_root(ctx)
    terminal_id = f"term-{uuid.uuid4().hex[:16]}"
    capture = Capture(ctx.settings.shell.output_cap)
    stream = TerminalStream(ctx.emit, terminal_id, capture)
    ctx.emit(TerminalStarted(terminal_id=terminal_id, command=label, cwd=ctx.root,
                             call_id=ctx.call_id))
    outcome, timed_out = sandbox.Exit(None, "SIGKILL"), False  # as reported if cancelled
    try:
        loopback = None if ctx.shell is None else ctx.shell.loopback
        outcome = sandbox.run(argv, ctx.root, ctx.settings, stream.write, timeout, pass_fds,
                              network=network, loopback=loopback, tty=tty, roots=ctx.extra_roots)
    except sandbox.ProcessTimeout as exc:
        outcome, timed_out = exc.exit, True
    except sandbox.Refused as exc:  # checked above; kept so no bwrap error can surface
        raise ToolError(f"Shell refused: {exc}. The command was not run.") from None
    except sandbox.SandboxUnavailable as exc:
        raise ToolError(f"Shell sandbox unavailable: {exc}. The command was not run.") from None
    except sandbox.LoopbackError as exc:
        raise ToolError(f"The session's sandbox network could not be set up: {exc.strerror}. The "
                        "command was not run.") from None
    except sandbox.LaunchError as exc:
        raise ToolError(f"The command could not be started: {exc.strerror}") from None
    finally:
        emit_quietly(ctx.emit, TerminalExited(terminal_id=terminal_id,
                                              exit_code=outcome.exit_code,
                                              signal=outcome.signal))
    return _result(terminal_id, capture, outcome, timed_out, timeout, tty)


def _result(terminal_id, capture, outcome, timed_out, timeout, tty=False):
    if outcome.exit_code is not None:
        status = f"exit code {outcome.exit_code}"
    else:
        status = f"killed by signal {outcome.signal}"
    parts = [capture.text(terminal=tty).rstrip("\n")] if capture.total else []
    if timed_out:
        parts.append(f"Command timed out after {timeout:g}s; the process tree was killed. "
                     + WAITING_HINT)
    parts.append(status)
    return ToolResult(
        text="\n".join(parts),
        is_error=timed_out or outcome.exit_code != 0,
        content=[{"type": "terminal", "terminal_id": terminal_id}],
        raw_output={"exitCode": outcome.exit_code, "signal": outcome.signal},
    )
