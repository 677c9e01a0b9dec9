"""Logging to stderr (and optionally a file). stdout is the protocol and nothing else.

Every line logged goes through :func:`term2acp.core.secrets.mask` (no API key or
secret-shaped header in a log line, a traceback included).

Once the agent serves the protocol (:func:`protect_stdio`), writing to stderr must never
block the hub: an editor that does not read our stderr would otherwise freeze the agent
at the 64 KiB a pipe holds (no answers, EOF on stdin ignored). So stderr is written
through a private non-blocking descriptor; what does not fit waits in a bounded backlog
that a greenlet flushes when the pipe has room, and what does not fit the backlog is
dropped and counted (the count is logged once the pipe drains). ``sys.stderr`` writes
(gevent's exception reports, tracebacks) take the same way.
"""

import collections
import io
import logging
import os
import stat
import sys
import time

import gevent
from gevent.monkey import get_original
from gevent.socket import wait_write

from term2acp.core import private, secrets

FORMAT = "term2-acp: %(levelname)s %(name)s: %(message)s"
BACKLOG = 256 * 1024  # bytes of log lines kept while stderr is full; more are dropped


class _Masking(logging.Formatter):
    def format(self, record):
        return secrets.mask(super().format(record))


def configure(env=os.environ):
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    level, handlers = log_handlers(env, sys.stderr)
    root.setLevel(level)
    for handler in handlers:
        root.addHandler(handler)


def log_handlers(env, stream):
    """``(level, handlers)`` of the agent's log for ``env``: ``stream`` (stderr) at
    ``TERM2ACP_LOG_LEVEL``, and with ``TERM2ACP_LOG_FILE`` that file too, stderr then
    keeping warnings and errors (agent-shell prints stderr into the chat)."""
    level_name = (env.get("TERM2ACP_LOG_LEVEL") or "WARNING").upper()
    level = getattr(logging, level_name, None)
    if not isinstance(level, int):
        level = logging.WARNING
    stderr = logging.StreamHandler(stream)
    stderr.setFormatter(_Masking(FORMAT))
    path = env.get("TERM2ACP_LOG_FILE")
    if not path:
        return level, [stderr]
    try:
        os.close(private.open_file(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND))
        handler = logging.FileHandler(path, encoding="utf-8")
    except OSError as exc:
        if level <= logging.WARNING:
            stderr.handle(logging.makeLogRecord({
                "name": "root", "levelno": logging.WARNING, "levelname": "WARNING",
                "msg": "cannot open TERM2ACP_LOG_FILE %s: %s", "args": (path, exc)}))
        return level, [stderr]
    handler.setFormatter(_Masking("%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"))
    stderr.setLevel(logging.WARNING)
    return level, [stderr, handler]


class StderrOutlet:
    """Non-blocking, bounded writes to stderr (module docstring). Thread-safe: the store's
    and the preload's native threads log too; only the hub's greenlet waits for room."""

    def __init__(self, fd, limit=BACKLOG):
        self.fd = fd
        self.limit = limit
        self.dropped = 0
        self._backlog = collections.deque()
        self._size = 0
        self._lock = get_original("threading", "Lock")()  # a real lock: native threads too
        self._wake = None  # the hub's async watcher that starts a flush (thread-safe send)
        self._flusher = None

    def attach(self, hub):
        """Flush the backlog from ``hub``'s loop whenever one builds up."""
        self._wake = hub.loop.async_()
        self._wake.start(self._start_flusher)

    def write(self, data):
        """Write ``data`` (bytes) now, or queue it, or drop it (counted); never blocks."""
        with self._lock:
            if not self._backlog:
                data = self._send(data)
                if not data:
                    return
            if self._size + len(data) > self.limit:
                self.dropped += 1
                return
            self._backlog.append(data)
            self._size += len(data)
        if self._wake is not None:
            self._wake.send()

    def flush_some(self):
        """Write what the pipe takes now; True when the backlog is empty."""
        with self._lock:
            while self._backlog:
                head = self._backlog[0]
                rest = self._send(head)
                self._size -= len(head) - len(rest)
                if rest:
                    self._backlog[0] = rest
                    return False
                self._backlog.popleft()
            if self.dropped:
                note = (f"term2-acp: WARNING term2acp.diagnostics: {self.dropped} log lines were "
                        "dropped: stderr was not being read\n").encode()
                self.dropped = 0
                rest = self._send(note)
                if rest:
                    self._backlog.append(rest)
                    self._size += len(rest)
                    return False
            return True

    def drain(self, timeout):
        """At exit: flush for at most ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not self.flush_some():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                wait_write(self.fd, timeout=left, timeout_exc=TimeoutError)
            except (TimeoutError, OSError):
                return False
        return True

    def _send(self, data):
        """Write without blocking; returns the part not written (all of it on EAGAIN)."""
        try:
            written = os.write(self.fd, data)
        except BlockingIOError:
            return data
        except OSError:  # stderr gone: nobody can read the log any more
            return b""
        return data[written:]

    def _start_flusher(self):
        if self._flusher is None or self._flusher.dead:
            self._flusher = gevent.spawn(self._flush_when_ready)
            self._flusher.name = "stderr-flush"

    def _flush_when_ready(self):
        while not self.flush_some():
            try:
                wait_write(self.fd)
            except OSError:
                return


class _OutletHandler(logging.Handler):
    def __init__(self, outlet):
        super().__init__()
        self.outlet = outlet
        self.setFormatter(_Masking(FORMAT))

    def emit(self, record):
        try:
            line = self.format(record) + "\n"
        except Exception:  # noqa: BLE001 - logging's own policy for a broken record
            self.handleError(record)
            return
        self.outlet.write(line.encode("utf-8", "replace"))


class _OutletStream(io.TextIOBase):
    """``sys.stderr`` (and ``sys.stdout``) once the protocol owns stdout: text goes to the
    outlet, masked."""

    def __init__(self, outlet):
        super().__init__()
        self.outlet = outlet

    @property
    def encoding(self):
        return "utf-8"

    def writable(self):
        return True

    def write(self, text):
        self.outlet.write(secrets.mask(str(text)).encode("utf-8", "replace"))
        return len(text)

    def fileno(self):
        return 2


_outlet = [None]


def _nonblocking_stderr():
    """A descriptor writing to our stderr that never blocks: a new open file description
    of the same pipe (so fd 2's stays as it is for anyone sharing it), else a duplicate put
    in non-blocking mode. A regular file never blocks: a plain duplicate."""
    mode = os.fstat(2).st_mode
    if stat.S_ISREG(mode):
        return os.dup(2)
    try:
        fd = os.open("/proc/self/fd/2", os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        fd = None
    if fd is not None and (os.fstat(fd).st_ino, os.fstat(fd).st_dev) == (
            os.fstat(2).st_ino, os.fstat(2).st_dev):
        return fd
    if fd is not None:
        os.close(fd)
    fd = os.dup(2)
    os.set_blocking(fd, False)
    return fd


def use_outlet():
    """Route the stderr log handler and ``sys.stderr`` through a :class:`StderrOutlet`
    (from the hub's thread, where the flusher runs)."""
    outlet = _outlet[0] = StderrOutlet(_nonblocking_stderr())
    outlet.attach(gevent.get_hub())
    root = logging.getLogger()
    replacement = _OutletHandler(outlet)
    for handler in list(root.handlers):
        if isinstance(handler, logging.StreamHandler) and not isinstance(
                handler, logging.FileHandler):
            replacement.setLevel(handler.level)  # with a log file: warnings and errors
            root.removeHandler(handler)
    root.addHandler(replacement)
    sys.stderr = sys.stdout = _OutletStream(outlet)
    return outlet


def drain(timeout):
    """Flush what stderr still owes, for at most ``timeout`` seconds (at exit)."""
    outlet = _outlet[0]
    return True if outlet is None else outlet.drain(timeout)


def protect_stdio():
    """Take stdin and stdout for the protocol; returns ``(in_fd, out_fd)``.

    stdout: a private duplicate for the writer, and fd 1 pointed at stderr, so a stray
    ``print``, a library banner or a child's output lands on stderr and can never corrupt
    the JSON-RPC stream.

    stdin: a private open file description (re-opened through ``/proc/self/fd/0`` where
    the kernel allows it), and fd 0 pointed at ``/dev/null``. No child process can read
    protocol bytes, and none can switch our pipe back to blocking mode: ``O_NONBLOCK``
    belongs to the open file description, which a child inheriting fd 0 would share.

    stderr: written through the non-blocking outlet from now on (:func:`use_outlet`).
    """
    sys.stdout.flush()
    out_fd = os.dup(1)  # non-inheritable by default
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        in_fd = os.open("/proc/self/fd/0", os.O_RDONLY | os.O_CLOEXEC)
        if os.path.isfile(f"/proc/self/fd/{in_fd}"):
            # A regular file: a new description would restart at offset 0.
            os.close(in_fd)
            raise OSError("regular file")
    except OSError:
        in_fd = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    use_outlet()
    return in_fd, out_fd
