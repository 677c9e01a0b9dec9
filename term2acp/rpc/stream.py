"""Byte framing: a cooperative line reader and the single stdout writer.

The reader never holds more than ``max_line`` bytes of one line: a longer line is
reported as :class:`Oversized` and its remaining bytes are discarded as they arrive.
"""

import errno
import logging
import os

import gevent
import gevent.os
from gevent.fileobject import FileObjectPosix
from gevent.queue import Queue

log = logging.getLogger(__name__)

CHUNK = 256 * 1024
DEFAULT_MAX_LINE = 64 * 1024 * 1024


class Oversized:
    """Marker yielded in place of a line that exceeded the size limit."""

    def __init__(self, size):
        self.size = size

    def __repr__(self):
        return f"Oversized({self.size})"


def read_lines(raw, max_line=DEFAULT_MAX_LINE, chunk=CHUNK):
    """Yield complete lines (without the newline) from a binary file object.

    Blank lines are skipped. A trailing line without a newline at EOF is yielded too.
    """
    buf = bytearray()
    dropping = 0  # >0 while discarding the rest of an oversized line
    while True:
        data = raw.read(chunk)
        if not data:
            break
        start = 0
        while True:
            nl = data.find(b"\n", start)
            if nl < 0:
                rest = data[start:]
                if dropping:
                    dropping += len(rest)
                elif len(buf) + len(rest) > max_line:
                    dropping = len(buf) + len(rest)
                    buf.clear()
                else:
                    buf += rest
                break
            piece = data[start:nl]
            start = nl + 1
            if dropping:
                yield Oversized(dropping + len(piece))
                dropping = 0
                continue
            if len(buf) + len(piece) > max_line:
                size = len(buf) + len(piece)
                buf.clear()
                yield Oversized(size)
                continue
            if buf:
                buf += piece
                line = bytes(buf)
                buf.clear()
            else:
                line = piece
            if line.strip():
                yield line
    if dropping:
        yield Oversized(dropping)
    elif buf.strip():
        yield bytes(buf)


def open_reader(fd):
    """A cooperative binary reader over ``fd`` that does not close it."""
    return FileObjectPosix(fd, "rb", bufsize=0, close=False)


class Writer:
    """Owns the protocol fd. One greenlet drains one queue, so order is queue order."""

    def __init__(self, fd, on_failure=None, before_write=None):
        self._fd = fd
        self._before_write = before_write  # e.g. commit the store before lines go out
        self._queue = Queue()
        self._on_failure = on_failure
        gevent.os.make_nonblocking(fd)
        self.failed = False
        self._greenlet = gevent.spawn(self._run)
        self._greenlet.name = "rpc-writer"

    def put(self, data):
        """Queue one encoded line (bytes, newline included)."""
        if not self.failed:
            self._queue.put(data)

    def _run(self):
        queue = self._queue
        while True:
            item = queue.get()
            if item is None:
                return
            parts = [item]
            stop = False
            while not queue.empty() and len(parts) < 512:
                nxt = queue.get_nowait()
                if nxt is None:
                    stop = True
                    break
                parts.append(nxt)
            if self._before_write is not None:
                try:
                    self._before_write()
                except Exception:  # noqa: BLE001 - never stop the writer
                    log.exception("pre-write hook failed")
            try:
                self._write(b"".join(parts))
            except OSError as exc:
                self.failed = True
                if exc.errno not in (errno.EPIPE, errno.EBADF):
                    log.warning("protocol writer failed: %s", exc)
                if self._on_failure is not None:
                    self._on_failure(exc)
                return
            if stop:
                return

    def _write(self, data):
        view = memoryview(data)
        while view:
            written = gevent.os.nb_write(self._fd, view)
            view = view[written:]

    def drain(self, timeout):
        """Flush what is queued, then stop; returns True when everything was written."""
        self._queue.put(None)
        self._greenlet.join(timeout)
        done = self._greenlet.dead
        if not done:
            self._greenlet.kill(block=False)
        return done and not self.failed

    def close(self):
        try:
            os.close(self._fd)
        except OSError:
            pass
