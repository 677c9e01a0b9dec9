"""Background processes: ``shell`` with ``background: true`` starts one, ``shell_output``
reads it (and types into it), ``shell_kill`` ends it.

Each session has one shell (``tools/shell_state.py``, ``ctx.shell``): the loopback its
commands share (``sandbox/loopback.py``: a server one call starts is reached by the next
call) and its background processes. A process lives until the model kills it, the session
closes (the session manager closes its shell) or the agent exits; nothing of it
outlives the agent (``sandbox/process.py``). Its output streams to the editor as the
terminal of the call that started it, and is kept for the model in a bounded buffer
(``[shell] process_output_kb``, cut in the middle with a note) until ``shell_output``
reads it. At most ``[shell] max_processes`` run at once per session; more is a failed
call that says so.
"""

import logging
import time
import uuid

import gevent
from gevent.event import Event
from marshmallow import Schema, fields, validate

from term2acp import sandbox
from term2acp.core.events import TerminalExited, TerminalStarted
from term2acp.tools.base import Tool, ToolError, ToolResult
from term2acp.tools.output import Capture, TerminalStream, emit_quietly

log = logging.getLogger(__name__)

MAX_WAIT = 600.0  # seconds a start or a read may wait for the process
QUIET = 0.5  # seconds of silence after new output that end a wait (the answer has come)
KILL_GRACE = 2.0  # seconds shell_kill lets a process end on SIGTERM before SIGKILL
MAX_INPUT = 1024 * 1024  # characters shell_output may type at once


def shell_of(ctx):
    """The session's shell (``tools/shell_state.py``), which the session hands its calls."""
    if ctx.shell is None:
        raise ToolError("Background processes are not available here (no session shell).")
    return ctx.shell


class Background:
    """One background process: its terminal, its unread output, its exit."""

    def __init__(self, process_id, label, ctx, tty):
        self.process_id = process_id
        self.label = label
        self.tty = tty
        self.terminal_id = f"term-{uuid.uuid4().hex[:16]}"
        self.cap = ctx.settings.shell.process_output_kb * 1024
        self.unread = Capture(self.cap)
        self.emit = ctx.emit
        self.stream = TerminalStream(ctx.emit, self.terminal_id, self)
        self.process = None
        self.last_output = 0.0
        self._more = Event()  # set by new output

    @property
    def running(self):
        return self.process is not None and self.process.running

    def add(self, data):  # the stream's capture: the unread buffer of the moment
        self.unread.add(data)
        self.last_output = time.monotonic()
        self._more.set()

    def start(self, argv, ctx, loopback, network=None):
        self.emit(TerminalStarted(terminal_id=self.terminal_id, command=self.label,
                                  cwd=ctx.root, call_id=ctx.call_id))
        try:
            self.process = sandbox.start(argv, ctx.root, ctx.settings, self.stream.write,
                                         self._exited, network=network, loopback=loopback,
                                         tty=self.tty, roots=ctx.extra_roots)
        except BaseException:
            emit_quietly(self.emit, TerminalExited(terminal_id=self.terminal_id,
                                                   exit_code=None, signal="SIGKILL"))
            raise

    def _exited(self, outcome):
        emit_quietly(self.emit, TerminalExited(terminal_id=self.terminal_id,
                                               exit_code=outcome.exit_code,
                                               signal=outcome.signal))

    def wait(self, seconds):
        """Wait up to ``seconds``: until it exits, or until output came and then paused
        for QUIET seconds (what was asked for has most likely arrived)."""
        deadline = time.monotonic() + min(seconds, MAX_WAIT)
        while self.running:
            now = time.monotonic()
            quiet = now - self.last_output
            if now >= deadline or (self.unread.total and quiet >= QUIET):
                return
            timeout = deadline - now
            if self.unread.total:
                timeout = min(timeout, QUIET - quiet)
            self._more.clear()
            gevent.wait([self.process.exited, self._more], timeout=timeout, count=1)

    def read(self, limit):
        """The output since the last read (at most ``limit`` bytes of it shown)."""
        unread, self.unread = self.unread, Capture(self.cap)
        return unread.text(limit, terminal=self.tty) if unread.total else ""

    def status(self):
        exit = self.process.exit if self.process is not None else None
        if exit is None:
            return f"Process {self.process_id} is running."
        if exit.exit_code is not None:
            return f"Process {self.process_id} exited with code {exit.exit_code}."
        return f"Process {self.process_id} was killed by signal {exit.signal}."

    def result(self, ctx, lead="", anchor=False):
        """What the model is told; the editor is shown the same text, or with ``anchor``
        (the call that started it) the process's terminal, which streams on."""
        text = self.read(ctx.settings.shell.output_cap).rstrip("\n")
        parts = [lead] if lead else []
        parts += [text] if text else ["(no new output)"]
        parts.append(self.status())
        exit = self.process.exit if self.process is not None else None
        raw = {"processId": self.process_id, "running": exit is None}
        if exit is not None:
            raw.update(exitCode=exit.exit_code, signal=exit.signal)
        content = [{"type": "terminal", "terminal_id": self.terminal_id}] if anchor else []
        return ToolResult(text="\n".join(parts), content=content, raw_output=raw)

    def kill(self, grace=0.0):
        if self.process is not None:
            self.process.kill(grace)


def start(ctx, argv, label, tty, wait_seconds, network=None):
    """``shell`` with ``background``: start the command and return at once (or once it
    exits or ``wait_seconds`` have passed) with its process id and its output so far."""
    shell = shell_of(ctx)
    process_id = shell.admit(ctx.settings)
    try:
        background = Background(process_id, label, ctx, tty)
        background.start(argv, ctx, shell.loopback, network)
        shell.processes[process_id] = background
    finally:
        shell.starting -= 1
    background.wait(wait_seconds)
    how = "with a terminal (tty) " if tty else ""
    host = ctx.settings.shell.network if network is None else network
    if host:
        reach = ("It runs on the host's network: commands with the network reach its ports "
                 "on 127.0.0.1, the others do not.")
    elif shell.loopback.unavailable is None:
        reach = "Later commands of this session reach its ports on 127.0.0.1."
    else:
        reach = ("Other commands cannot reach its ports on this host (the sandbox cannot "
                 f"share a network namespace here: {shell.loopback.unavailable}).")
    lead = (f"Started {how}in the background as process {process_id}. Read its output with "
            f"shell_output (process_id {process_id!r}; its input parameter types into it), "
            f"end it with shell_kill. {reach}")
    return background.result(ctx, lead, anchor=True)


def named(ctx, args, cap=80):
    """``p1 (npm run dev)``: the process id with the command it runs, when it is known."""
    process_id = args.get("process_id", "?")
    shell = ctx.shell
    background = shell.processes.get(process_id) if shell is not None else None
    if background is None:
        return process_id
    label = " ".join(background.label.split())
    return f"{process_id} ({label if len(label) <= cap else label[:cap - 1] + '…'})"


class ShellOutputParams(Schema):
    process_id = fields.String(required=True, validate=validate.Length(min=1),
                               metadata={"description": "The id shell returned (e.g. p1)."})
    input = fields.String(validate=validate.Length(max=MAX_INPUT),
                          metadata={"description": "Text to write to the process's stdin "
                                                   "first (e.g. \"bob\\n\"; with tty, keys "
                                                   "such as \"\\u0003\" for Ctrl-C)."})
    wait_seconds = fields.Float(validate=validate.Range(min=0, max=MAX_WAIT),
                                metadata={"description": (
                                    "Wait up to this long before reading: until the "
                                    "process exits, or until new output has come and "
                                    "paused for half a second (default 0: read at once).")})


class ShellOutputTool(Tool):
    name = "shell_output"
    kind = "execute"
    Params = ShellOutputParams
    description = (
        "Read a background process (started by shell with background: true): optionally "
        "write input to its stdin first, optionally wait for it to exit, then return the "
        "output since the last read and whether it is still running or how it exited.")

    def title(self, args):
        return f"Output of {args.get('process_id', '?')}"

    def title_in(self, args, ctx):
        return f"Output of {named(ctx, args)}"

    def approval(self, args, ctx):
        return None  # the process is sandboxed

    def run(self, args, ctx):
        background = shell_of(ctx).get(args["process_id"])
        if args.get("input"):
            if not background.running:
                raise ToolError(f"{background.status()} It reads no more input; its last "
                                f"output:\n{background.read(ctx.settings.shell.output_cap)}")
            try:
                background.process.write(args["input"].encode("utf-8"))
            except sandbox.InputClosed:
                raise ToolError(f"Process {background.process_id} does not read its input "
                                "any more (it closed its stdin).") from None
        background.wait(args.get("wait_seconds") or 0)
        return background.result(ctx)


class ShellKillParams(Schema):
    process_id = fields.String(required=True, validate=validate.Length(min=1),
                               metadata={"description": "The id shell returned (e.g. p1)."})


class ShellKillTool(Tool):
    name = "shell_kill"
    kind = "execute"
    Params = ShellKillParams
    description = ("End a background process and every process it started (SIGTERM, then "
                   "SIGKILL after 2 s); returns its unread output and how it ended.")

    def title(self, args):
        return f"Kill {args.get('process_id', '?')}"

    def title_in(self, args, ctx):
        return f"Kill {named(ctx, args)}"

    def approval(self, args, ctx):
        return None  # it ends a sandboxed process of this session

    def run(self, args, ctx):
        shell = shell_of(ctx)
        background = shell.get(args["process_id"])
        lead = "" if background.running else "It had already ended."
        background.kill(KILL_GRACE)  # SIGTERM first: it may clean up
        result = background.result(ctx, lead)
        del shell.processes[background.process_id]
        return result
