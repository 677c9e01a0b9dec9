"""The stdio transport: an MCP server as a child process speaking newline-delimited JSON.

The child gets exactly the configured env plus PATH and HOME (ours unless given), runs in
the session root, in its own session (so its pid is its process group), with pipes we own
for stdin, stdout and stderr: it never inherits our stdout. Its stdout is read
cooperatively line by line (a line that is not JSON is logged and skipped); its stderr
lines go to our log and the last few are kept, because when the server dies they are the
best explanation for the user. ``close`` closes stdin (the spec's polite stop), then sends
SIGTERM and finally SIGKILL to the whole group, each wait bounded. An agent that is killed
cannot close: the server dies with it (a parent-death signal) and its group is killed by
the keeper (``keeper.py``).

The server is started, watched and ended by ``sandbox/process.py`` (the one process
module), with its stdout and stderr pipes handed to us. That module (with ``sh``, tens of
ms of imports) is the preload's to load, and a session's servers start right after its
``session/new`` answer, often before the preload has run: so the first server loads it in
a thread of gevent's pool (:func:`_process`, as the preload does; a look-up once loaded),
and neither that answer nor the hub waits for the import.

MCP servers are programs the user configured in the editor, not commands the model chose:
they run outside the bubblewrap sandbox, as the editor would run them.
"""

import collections
import importlib
import json
import logging
import os
import signal

import gevent
import gevent.lock
import gevent.os
from gevent.socket import wait_read

from term2acp.core import executables, loading
from term2acp.core.pacing import breathe
from term2acp.mcp import keeper
from term2acp.mcp.rpc import ServerGone, TooLarge, plain, too_large

log = logging.getLogger(__name__)

READ_CHUNK = 64 * 1024
MAX_LINE = 16 << 20  # one JSON-RPC message: a longer stdout line fails the server
STDERR_LINE_CAP = 2000
STDERR_KEEP = 5
STOP_GRACE = 0.5  # after closing stdin
TERM_GRACE = 2.0  # after SIGTERM
KILL_GRACE = 1.0  # for the readers, once it has exited


class LaunchFailed(Exception):
    """The server could not be started (missing command, bad cwd, ...)."""


def resolve_command(command, path, cwd):
    """An absolute command as given; a bare name (v1 editors send npx) looked up on the
    absolute entries of ``path`` (None: the PATH the agent started with), pinned, and never
    from inside a session root (``core/executables.py``)."""
    if os.path.isabs(command):
        return command
    if os.sep in command:
        raise LaunchFailed(f"command must be an absolute path or a bare name, not {command!r}")
    found = executables.find(command, path)
    if found is None:
        raise LaunchFailed(f"command not found on PATH: {command} (only absolute PATH entries "
                           "are searched)")
    try:
        executables.check(found, [cwd])
    except executables.Unsafe as exc:
        raise LaunchFailed(str(exc)) from None
    return found


def child_env(given):
    env = {k: v for k, v in given.items() if "\0" not in k and "=" not in k and "\0" not in v}
    for key in ("PATH", "HOME"):
        if key not in env and key in os.environ:
            env[key] = os.environ[key]
    env.setdefault("PATH", os.defpath)
    return env


def _process():
    """``sandbox/process.py``, imported in a thread (``core/loading.py``; module docstring)."""
    return loading.in_thread(importlib.import_module, "term2acp.sandbox.process")


class StdioTransport:
    def __init__(self, config, cwd, spawn):
        self.config = config
        self.cwd = cwd
        self.spawn = spawn  # the hub's group spawn: readers belong to the session
        self.proc = None  # its sandbox.process.Process once started
        self.connection = None
        self.stderr_tail = collections.deque(maxlen=STDERR_KEEP)
        self._readers = []
        self._write_lock = gevent.lock.Semaphore()
        self._closing = False

    @property
    def pid(self):
        return self.proc.pid if self.proc is not None else None

    # ------------------------------------------------------------ start
    def open(self, connection):
        self.connection = connection
        env = child_env(self.config.env)
        argv = [resolve_command(self.config.command, self.config.env.get("PATH"), self.cwd),
                *self.config.args]
        process = _process()
        keeper.start()
        breathe()  # a launch holds the hub while sh waits for the exec: what waits goes next
        if self._closing:
            raise LaunchFailed("the session was closed while the server was starting")
        out, err = os.pipe(), os.pipe()  # (r, w) for stdout, stderr
        try:
            self.proc = process.start(argv, self.cwd, env, stdin=process.PIPE, stdout=out[1],
                                      stderr=err[1], on_exit=self._ended, counted=False)
        except OSError as exc:
            os.close(out[0])
            os.close(err[0])
            raise LaunchFailed(f"cannot start {self.config.command}: {exc.strerror or exc}") from None
        finally:
            os.close(out[1])
            os.close(err[1])
        keeper.watch(self.proc.pid)  # before any yield: so before its exit's unwatch
        breathe()
        if self._closing:  # closed while the child was being started: stop it right away
            self.proc.kill()
            os.close(out[0])
            os.close(err[0])
            raise LaunchFailed("the session was closed while the server was starting")
        for fd in (out[0], err[0]):
            gevent.os.make_nonblocking(fd)
        log.info("mcp %s: started pid %s (%s)", self.config.name, self.proc.pid, self.config.command)
        self._readers = [self.spawn(self._read_stdout, out[0]),
                         self.spawn(self._read_stderr, err[0])]

    def _ended(self, _exit):
        """It has exited and what it left in its group was killed: the keeper forgets it."""
        keeper.unwatch(self.proc.pid)

    # ------------------------------------------------------------ io
    def send(self, message):
        data = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        if self.proc is None or self.proc.input is None:
            raise ServerGone(self._reason())
        with self._write_lock:
            try:
                self.proc.write(data)
            except OSError as exc:  # process.InputClosed (EPIPE): the server is gone
                raise ServerGone(self._reason(f"cannot write to the server "
                                              f"({os.strerror(exc.errno)})")) from None

    def _lines(self, fd, strict=False):
        """Yield complete lines (bytes, without the newline); an over-long line is dropped,
        or with ``strict`` raises TooLarge (never buffered whole either way)."""
        buf, dropping = bytearray(), False
        try:
            while True:
                wait_read(fd)
                try:
                    chunk = os.read(fd, READ_CHUNK)
                except BlockingIOError:
                    continue
                if not chunk:
                    break
                buf += chunk
                while True:
                    end = buf.find(b"\n")
                    if end < 0:
                        break
                    line = bytes(buf[:end])
                    del buf[:end + 1]
                    if dropping:
                        dropping = False
                    else:
                        yield line
                if len(buf) > MAX_LINE:
                    if strict:
                        raise too_large("a line", MAX_LINE)
                    log.warning("mcp %s: dropped a line longer than %d bytes", self.config.name, MAX_LINE)
                    buf.clear()
                    dropping = True
            if buf and not dropping:
                yield bytes(buf)
        finally:
            os.close(fd)

    def _read_stdout(self, fd):
        try:
            for line in self._lines(fd, strict=True):
                if not line.strip():
                    continue
                try:
                    message = json.loads(line)
                except (ValueError, RecursionError):  # not JSON, or nested past the parser
                    log.warning("mcp %s: ignored a stdout line that is not JSON: %r", self.config.name,
                                self.config.redact(line[:200].decode("utf-8", "replace")))
                    continue
                self.connection.receive(message)
        except TooLarge as exc:
            log.warning("mcp %s: %s", self.config.name, exc)
            self.connection.lost(str(exc))
            if self.proc is not None:
                self.proc.kill(wait=False)
        finally:
            self._exited()

    def _read_stderr(self, fd):
        for line in self._lines(fd):
            text = plain(self.config.redact(line.decode("utf-8", "replace").rstrip()), STDERR_LINE_CAP)
            if text:
                self.stderr_tail.append(text)
                log.info("mcp %s stderr: %s", self.config.name, text)

    def _exited(self):
        """stdout closed: the server is gone (or going); tell the connection why."""
        if self._closing:
            reason = "the server was stopped"
        else:
            end = self.proc.wait(STOP_GRACE) if self.proc is not None else None
            how = "closed its output" if end is None else \
                f"exited with status {end.exit_code}" if end.exit_code is not None else \
                f"was killed by signal {signal.Signals[end.signal].value}"
            reason = self._reason(f"the server {how}")
            log.warning("mcp %s: %s", self.config.name, reason)
        self.connection.lost(reason)

    def _reason(self, what="the server is not running"):
        # Let the stderr reader catch up with the last words, bounded.
        if self._readers and not self._readers[1].dead:
            self._readers[1].join(0.2)
        if self.stderr_tail:
            return f"{what}; its last output: {' | '.join(self.stderr_tail)}"
        return what

    # ------------------------------------------------------------ stop
    def close(self):
        """Stop the server and every process of its group; bounded (STOP_GRACE, TERM_GRACE,
        then a SIGKILL's reap, ``process.REAP_TIMEOUT`` at worst)."""
        self._closing = True
        proc = self.proc
        if proc is not None:
            proc.close_input()
            if proc.wait(STOP_GRACE) is None:
                proc.signal(signal.SIGTERM)
                if proc.wait(TERM_GRACE) is None:
                    proc.kill()  # its group, reaped (bounded)
        gevent.joinall(self._readers, timeout=KILL_GRACE)
        for reader in self._readers:
            reader.kill(block=False)
        if self.connection is not None:
            self.connection.lost("the server was stopped")
