"""Byte framing: a cooperative line reader and the single stdout writer.

The reader never holds more than ``max_line`` bytes of one line: a longer line is
reported as :class:`Oversized` and its remaining bytes are discarded as they arrive.
"""

import errno
import logging
import os
from collections import deque

import gevent
import gevent.os
from gevent.event import Event
from gevent.fileobject import FileObjectPosix

log = logging.getLogger(__name__)

CHUNK = 256 * 1024
DEFAULT_MAX_LINE = 64 * 1024 * 1024
DEFAULT_QUEUE_BYTES = 4 * 1024 * 1024  # what may wait for stdout before producers block
BATCH_BYTES = 64 * 1024  # one write; what is already taken when a cancel arrives
ITEM_OVERHEAD = 64  # bytes of bookkeeping counted per queued line


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
    """Owns the protocol fd. One greenlet drains one queue, so order is queue order.

    The queue is bounded in bytes for producers that can wait (:meth:`put_wait`, used by
    the greenlets that stream session updates): when a client stops reading stdout they
    block instead of growing the queue without limit. :meth:`put` never blocks (the
    reader answers through it, and it must stay free to read a cancel). A queued item may
    carry a ``tag``; the writer skips tagged items for which ``discard(tag)`` is true when
    it reaches them (a cancelled turn's message chunks), and their bytes free room at once
    when :meth:`sweep` runs: the bytes queued are counted per tag, so a sweep asks about
    each tag once, not about each queued line (20 streaming turns fill the queue with
    thousands of lines, and every producer that finds it full sweeps).

    Lines that report nothing the store must keep (the answer to ``session/list``) go
    through :meth:`put_quick`: they are written without ``before_write``, even while it
    waits (a write blocked on another process's lock), and may overtake queued lines.
    """

    def __init__(self, fd, on_failure=None, before_write=None, limit=DEFAULT_QUEUE_BYTES,
                 discard=None):
        self._fd = fd
        # Called right before each batch of lines is written (the session store's commit:
        # what the lines report is durable first); the composition root may set it later.
        self.before_write = before_write
        self._items = deque()  # (bytes, tag or None)
        self._quick = deque()  # lines that need no before_write (put_quick)
        self._quick_bytes = 0  # their bytes (plus the per-item overhead), until taken
        self._queued = 0  # bytes (plus a per-item overhead) in _items, swept ones not
        self._tagged = {}  # tag -> [bytes, items] of its lines in _items, not swept
        self._swept = {}  # tag -> its lines still in _items, whose bytes a sweep freed
        self._limit = limit
        self._discard = discard
        self._wake = Event()  # the writer greenlet waits for items on it
        self._room = Event()  # producers in put_wait wait for room on it
        self._room.set()
        self._idle = Event()  # set while nothing is queued or being written
        self._idle.set()
        self._stopping = False
        self._on_failure = on_failure
        gevent.os.make_nonblocking(fd)
        self.failed = False
        self._greenlet = gevent.spawn(self._run)
        self._greenlet.name = "rpc-writer"

    @property
    def queued_bytes(self):
        return self._queued

    def backlogged(self):
        """True while the queue is at its bound (the client is not reading); the quick
        lines waiting count too."""
        return self._queued + self._quick_bytes >= self._limit

    def put(self, data, tag=None):
        """Queue one encoded line (bytes, newline included); never blocks."""
        if self.failed:
            return
        self._items.append((data, tag))
        self._queued += len(data) + ITEM_OVERHEAD
        if tag is not None:
            self._count(tag, len(data) + ITEM_OVERHEAD)
        if self._queued >= self._limit:
            self._room.clear()
        self._wake.set()

    def _count(self, tag, size):
        counts = self._tagged.get(tag)
        if counts is None:
            self._tagged[tag] = [size, 1]
        else:
            counts[0] += size
            counts[1] += 1

    def put_quick(self, data):
        """Queue one line that needs no ``before_write``; never blocks."""
        if self.failed:
            return
        self._quick.append(data)
        self._quick_bytes += len(data) + ITEM_OVERHEAD
        self._wake.set()

    def put_wait(self, data, tag=None):
        """Like :meth:`put`, but first waits while the queue is full (back-pressure).

        The wait ends when the writer makes room, fails or stops; the caller's greenlet
        can be killed while it waits (a cancelled turn)."""
        if self._queued >= self._limit and not self._stopping:
            if gevent.getcurrent() is not self._hub:
                self.sweep()
                if self._queued >= self._limit:
                    self._room.wait()
        if self.failed:  # put(), inlined: this is the per-update path
            return
        self._items.append((data, tag))
        self._queued += len(data) + ITEM_OVERHEAD
        if tag is not None:
            self._count(tag, len(data) + ITEM_OVERHEAD)
        if self._queued >= self._limit:
            self._room.clear()
        self._wake.set()

    @property
    def _hub(self):
        return gevent.get_hub()

    def sweep(self):
        """Free the room of queued items whose tag is discarded now (the writer skips
        them when it reaches them)."""
        discard = self._discard
        if discard is None or not self._tagged:
            return
        gone = [tag for tag in self._tagged if discard(tag)]
        for tag in gone:
            size, items = self._tagged.pop(tag)
            self._swept[tag] = self._swept.get(tag, 0) + items
            self._queued -= size
        if gone and self._queued < self._limit:
            self._room.set()

    def _next_batch(self):
        items, discard = self._items, self._discard
        parts, size = [], 0
        while items and size < BATCH_BYTES:
            data, tag = items.popleft()
            if tag is not None:
                if self._uncount(tag, len(data) + ITEM_OVERHEAD):
                    continue  # swept: its room is free already
                if discard is not None and discard(tag):
                    continue
            else:
                self._queued -= len(data) + ITEM_OVERHEAD
            parts.append(data)
            size += len(data)
        if self._queued < self._limit // 2 or not items:
            self._room.set()
        return parts

    def _uncount(self, tag, size):
        """One line of ``tag`` leaves the queue; True when a sweep freed it already."""
        left = self._swept.get(tag)
        if left is not None:
            if left > 1:
                self._swept[tag] = left - 1
            else:
                del self._swept[tag]
            return True
        self._queued -= size
        counts = self._tagged[tag]
        if counts[1] > 1:
            counts[0] -= size
            counts[1] -= 1
        else:
            del self._tagged[tag]
        return False

    def wait_flushed(self):
        """Wait cooperatively until every line queued so far is written (and those queued
        meanwhile), or the writer has stopped."""
        if self._items or self._quick:
            self._idle.clear()
        self._idle.wait()

    def _run(self):
        try:
            while not self.failed:
                if self._quick:
                    self._write_quick()
                    continue
                if not self._items:
                    if self._stopping:
                        return
                    self._idle.set()
                    self._wake.clear()
                    self._wake.wait()
                    continue
                self._idle.clear()
                parts = self._next_batch()
                if not parts:
                    continue
                if self.before_write is not None:
                    self._before_write()
                self._send(parts[0] if len(parts) == 1 else b"".join(parts))
        finally:
            self._idle.set()

    def _before_write(self):
        """Run ``before_write``; quick lines that come meanwhile are written at once."""
        hook = gevent.spawn(self._call_before_write)
        hook.name = "rpc-writer-before-write"
        while not hook.dead:
            self._wake.clear()
            if self._quick:
                self._write_quick()
                continue
            gevent.wait([hook, self._wake], count=1)

    def _call_before_write(self):
        try:
            self.before_write()
        except Exception:  # noqa: BLE001 - never stop the writer
            log.exception("pre-write hook failed")

    def _write_quick(self):
        quick, self._quick = self._quick, deque()
        self._quick_bytes = 0
        self._send(b"".join(quick))

    def _send(self, data):
        if self.failed:
            return
        try:
            self._write(data)
        except OSError as exc:
            self.failed = True
            self._items.clear()
            self._quick.clear()
            self._quick_bytes = 0
            self._tagged.clear()
            self._swept.clear()
            self._queued = 0
            self._room.set()
            if exc.errno not in (errno.EPIPE, errno.EBADF):
                log.warning("protocol writer failed: %s", exc)
            if self._on_failure is not None:
                self._on_failure(exc)

    def _write(self, data):
        view = memoryview(data)
        while view:
            written = gevent.os.nb_write(self._fd, view)
            view = view[written:]

    def drain(self, timeout):
        """Flush what is queued, then stop; returns True when everything was written."""
        self._stopping = True
        self._room.set()
        self._wake.set()
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
