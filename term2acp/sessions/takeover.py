"""Taking a session over from another term2-acp process.

Clients that run one agent process per window or tab (CodeCompanion, agent-shell) reopen a
session that another process still holds. A session is live in one process at a time (its
``flock``, ``sessions/live.py``), so the opener asks the holder to let it go:

1. the opener writes ``<locks>/<id>.takeover`` (its pid) and sends the holder ``SIGUSR2``;
   the holder's pid is the one written in the lock file, and the lock being held means that
   process is alive and is the holder;
2. the holder, on ``SIGUSR2``, closes every live session that has a request: it tells its
   own client why (a message that is not journaled, so the opener's replay does not show
   it), cancels the turn if one runs, and releases the lock; the session stays known to it
   as taken over, so a later prompt there is refused with what to do;
3. the opener waits for the lock, bounded by ``WAIT`` seconds, polling it (``flock`` has
   no timed wait), then attaches the session as usual.

A holder that does not let go in time (its hub is stuck) leaves the opener with the usual
"open in another process" error.
"""

import contextlib
import logging
import os
import signal
import stat

import gevent

from term2acp.sessions.errors import SessionLocked

log = logging.getLogger(__name__)

SIGNAL = signal.SIGUSR2
WAIT = 5.0  # seconds the opener waits for the holder to let the session go
POLL = 0.02  # seconds between two tries of the lock, doubling up to POLL_MAX
POLL_MAX = 0.2
SUFFIX = ".takeover"


def request_path(locks, session_id):
    return os.path.join(locks, session_id + SUFFIX)


def take(locks, session_id, holder, attach, wait=WAIT):
    """Ask ``holder`` (a pid, as the lock file names it) to let ``session_id`` go, then
    ``attach()`` once the lock is free. Raises :class:`SessionLocked` when it is still held
    after ``wait`` seconds."""
    path = request_path(locks, session_id)
    _write(path, str(os.getpid()))
    try:
        _signal(holder)
        deadline = gevent.get_hub().loop.now() + wait
        pause = POLL
        while True:
            try:
                return attach()
            except SessionLocked as exc:
                if gevent.get_hub().loop.now() >= deadline:
                    raise SessionLocked(exc.args[0], wait) from None
            gevent.sleep(pause)
            pause = min(POLL_MAX, pause * 2)
    finally:
        with contextlib.suppress(OSError):
            if _read(path) == str(os.getpid()):
                os.unlink(path)


def requested(locks, session_id):
    """The pid of a process that asked for ``session_id``, or None."""
    text = _read(request_path(locks, session_id))
    return int(text) if text and text.isdigit() else None


def _signal(holder):
    try:
        pid = int(holder)
    except (TypeError, ValueError):
        return  # an old lock file without a pid: wait for its holder to close it
    if pid == os.getpid() or pid <= 1:
        return
    try:
        os.kill(pid, SIGNAL)
    except (ProcessLookupError, PermissionError) as exc:
        log.info("takeover: could not signal pid %s: %s", pid, exc)


def _write(path, text):
    temp = f"{path}.{os.getpid()}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW,
                 0o600)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    os.replace(temp, path)


def _read(path):
    """The request at ``path``: only a regular file of this user counts. Opened without
    blocking and without following a link (a FIFO put there would block the hub)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            log.warning("takeover: ignoring %s, not a regular file of this user", path)
            return None
        return os.read(fd, 32).decode(errors="replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)
