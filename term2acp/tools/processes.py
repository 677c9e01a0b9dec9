"""Background processes: ``shell`` with ``background: true`` starts one, ``shell_output``
reads it (and types into it), ``shell_kill`` ends it.

Each session has one :class:`SessionShell`: the loopback its commands share
(``sandbox/loopback.py``: a server one call starts is reached by the next call) and its
background processes. A process lives until the model kills it, the session closes
(``close_session``, called by the session manager) or the agent exits; nothing of it
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
KEEP_EXITED = 16  # exited processes kept per session until read (older ones are dropped)
MAX_INPUT = 1024 * 1024  # characters shell_output may type at once

_shells = {}  # session id -> SessionShell


def shell_of(session_id):
    """The session's :class:`SessionShell` (made on first use)."""
    shell = _shells.get(session_id)
    if shell is None:
        shell = _shells[session_id] = SessionShell(session_id)
    return shell


def loopback_of(session_id):
    return shell_of(session_id).loopback


def running(session_id):
    """How many background processes of the session are running."""
    shell = _shells.get(session_id)
    return len(shell.live()) if shell is not None else 0


def freeze(session_id):
    """Stop the session's background processes, whole trees, until the returned hold is
    thawed (``thaw()``, or leaving it as a context manager): nothing of the session
    writes meanwhile. Holds nest (/undo in read-only mode): the last thaw resumes them."""
    shell = _shells.get(session_id)
    return shell.hold() if shell is not None else _Hold(None)


class _Hold:
    def __init__(self, shell):
        self.shell = shell

    def thaw(self):
        shell, self.shell = self.shell, None
        if shell is not None:
            shell.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.thaw()


def close_session(session_id):
    """End the session's processes (their exits are reported) and release its loopback."""
    shell = _shells.pop(session_id, None)
    if shell is not None:
        shell.close()


class SessionShell:
    def __init__(self, session_id):
        self.session_id = session_id
        self.loopback = sandbox.Loopback()
        self.processes = {}  # process id -> Background, in start order
        self.starting = 0  # slots admitted whose start has not returned yet
        self._count = 0
        self._holds, self._frozen = 0, None  # freeze(): how many holds, what they stopped

    def hold(self):
        self._holds += 1
        if self._holds == 1:
            self._frozen = sandbox.freeze([p.process.pid for p in self.live()])
        return _Hold(self)

    def release(self):
        self._holds -= 1
        if self._holds == 0 and self._frozen is not None:
            self._frozen, frozen = None, self._frozen
            frozen.thaw()

    def live(self):
        return [p for p in self.processes.values() if p.running]

    def admit(self, settings):
        """A new process id with its slot taken (``starting``, until the start returns:
        the calls of one round start side by side), or ToolError when the session is at
        its limit."""
        limit = settings.shell.max_processes
        live = self.live()
        if len(live) + self.starting >= limit:
            ids = ", ".join([p.process_id for p in live] + ["starting"] * self.starting)
            raise ToolError(f"{len(live) + self.starting} background processes are already "
                            "running in this "
                            f"session ({ids}), the limit ([shell] max_processes = {limit}). "
                            "End one with shell_kill first, or run the command in the "
                            "foreground.")
        exited = [p for p in self.processes.values() if not p.running]
        for old in exited[:max(0, len(exited) - KEEP_EXITED + 1)]:
            del self.processes[old.process_id]
        self._count += 1
        self.starting += 1
        return f"p{self._count}"

    def get(self, process_id):
        found = self.processes.get(process_id)
        if found is None:
            known = ", ".join(self.processes) or "none"
            raise ToolError(f"There is no background process {process_id!r} in this session "
                            f"(known: {known}). Start one with shell and background: true.")
        return found

    def close(self):
        for process in self.processes.values():
            process.kill()
        self.loopback.close()


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
    shell = shell_of(ctx.session_id)
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
    shell = _shells.get(ctx.session_id)
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
        background = shell_of(ctx.session_id).get(args["process_id"])
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
        shell = shell_of(ctx.session_id)
        background = shell.get(args["process_id"])
        lead = "" if background.running else "It had already ended."
        background.kill(KILL_GRACE)  # SIGTERM first: it may clean up
        result = background.result(ctx, lead)
        del shell.processes[background.process_id]
        return result
