"""A started command's output, read by the agent (``process.py``'s pump greenlet).

The command's stdout and stderr (or its terminal) are one pipe the agent reads 64 KiB at a
time, small reads coalesced for ``COALESCE`` seconds, and handed on in chunks of at most
``CHUNK`` bytes. Reading ends at end of file, or once the command itself has exited and
what it wrote is read: a process it left behind that holds the pipe open (``server &``
in a command run outside the sandbox) must not keep its exit unnoticed until a deadline.
A pipe that is never empty (a command writing without pause) does not hold the hub: the
reading breathes whenever the hub is overdue (``core/pacing.py``).
"""

import errno
import os
import select
import time

from gevent.event import Event
from gevent.hub import get_hub

from term2acp.core.pacing import breathe, overdue

CHUNK = 64 * 1024  # largest chunk handed to on_output
COALESCE = 0.05  # seconds a small chunk may wait for more output
NO_PIDFD = -1  # the command's exit cannot be watched here: read to end of file


def pump(fd, on_output, exited):
    """Read ``fd`` until end of file or, once the command has exited (``exited``, its
    pidfd, is readable; None: it has exited; NO_PIDFD: not known here), until nothing
    more is there; deliver it to ``on_output``, in chunks of at most CHUNK bytes, small
    reads coalesced."""
    wake = Event()  # the output is readable, or the command has exited
    loop = get_hub().loop
    watched = exited is not None and exited != NO_PIDFD
    watchers = [loop.io(fd, 1)] + ([loop.io(exited, 1)] if watched else [])
    for watcher in watchers:
        watcher.start(wake.set)
    done = exited is None
    pending = bytearray()
    flush_at = None
    try:
        while True:
            data = _read(fd)
            if data is None:  # nothing there now
                if done:
                    break  # the command has exited and its output is read
                if watched and _readable(exited):  # read once more: what it wrote before
                    done = True
                    continue
                wait = None if flush_at is None else max(0.0, flush_at - time.monotonic())
                if not wake.wait(wait):
                    on_output(bytes(pending))  # quiet for COALESCE: deliver what came
                    pending.clear()
                    flush_at = None
                wake.clear()
                continue
            if not data:
                break
            pending += data
            if flush_at is None:
                flush_at = time.monotonic() + COALESCE
            while len(pending) >= CHUNK:
                on_output(bytes(pending[:CHUNK]))
                del pending[:CHUNK]
            if not pending:
                flush_at = None
            if overdue():  # a command that never stops writing: the hub still gets its turns
                breathe()
    finally:
        for watcher in watchers:
            watcher.stop()
            watcher.close()
    if pending:
        on_output(bytes(pending))


def _readable(fd):
    return bool(select.select([fd], [], [], 0)[0])


def _read(fd):
    try:
        return os.read(fd, CHUNK)
    except BlockingIOError:
        return None
    except OSError as exc:
        if exc.errno == errno.EIO:  # a terminal whose last user closed it: its EOF
            return b""
        raise
