"""Server-sent events: the one decoder (the model APIs' streams, MCP's event streams), and a
pacing rule.

:class:`SSEDecoder` turns bytes into ``(event, data)`` pairs following the WHATWG rules
that matter here: ``event:`` and ``data:`` fields (several ``data:`` lines join with a
newline), comments (``:``), ``id``/``retry`` ignored, a blank line dispatches, and lines
end with LF, CRLF or CR. An event without an ``event:`` field comes out as ``None`` (the
spec's "message" is the caller's to supply). One event, or one line, larger than the
decoder's ``limit`` raises :class:`~term2acp.net.errors.EventTooLarge` (a ``ValueError``):
a broken or hostile stream, not a big answer.

:func:`paced` is the loop-side rule: a server that writes its whole
answer at once (a fast local model on loopback) keeps the socket always readable, so a
plain read loop never blocks and therefore never lets the hub run: nothing reaches stdout
and ``session/cancel`` is never read. ``paced`` gives the hub a turn whenever
``YIELD_EVERY`` seconds passed since the last one, measured across the consumer's work too
(the generator resumes only when the consumer asks for the next event).
"""

import time

from term2acp.core.pacing import breathe, overdue
from term2acp.net.errors import EventTooLarge

YIELD_EVERY = 0.002  # seconds a stream loop may run without letting other greenlets in
MAX_EVENT_BYTES = 16 << 20  # one event larger than this is a broken stream, not a big answer


class SSEDecoder:
    def __init__(self, limit=MAX_EVENT_BYTES):
        self.limit = limit
        self._pending = b""
        self._event = None
        self._data = []
        self._size = 0

    def feed(self, chunk):
        """Decode ``chunk``; returns a list of complete ``(event, data)`` pairs."""
        buffer = self._pending + chunk
        if b"\r" in buffer:
            keep_cr = buffer.endswith(b"\r")  # its LF may come with the next chunk
            if keep_cr:
                buffer = buffer[:-1]
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            if keep_cr:
                buffer += b"\r"
        *lines, self._pending = buffer.split(b"\n")
        if len(self._pending) > self.limit:
            raise EventTooLarge(f"an event line exceeds {_bound(self.limit)}", self.limit)
        out = []
        for line in lines:
            if line:
                self._field(line)
            elif self._data:
                out.append((self._event, "\n".join(self._data)))
                self._event, self._data, self._size = None, [], 0
            else:
                self._event = None
        return out

    def finish(self):
        """At the end of the body: the last event even without its blank line (some local
        servers close right after it)."""
        if self._pending.strip(b"\r"):
            self._field(self._pending.strip(b"\r"))
        self._pending = b""
        if not self._data:
            return []
        event = (self._event, "\n".join(self._data))
        self._event, self._data, self._size = None, [], 0
        return [event]

    def _field(self, line):
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            self._size += len(value)
            if self._size > self.limit:
                raise EventTooLarge(f"an event exceeds {_bound(self.limit)}", self.limit)
            self._data.append(value.decode("utf-8", "replace"))
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        # comments (empty name), id and retry carry nothing our streams need


def _bound(limit):
    return f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit} bytes"


def events(response, read_size=65536, limit=MAX_EVENT_BYTES):
    """``(event, data)`` pairs from a streamed HTTP response body, paced for the hub."""
    decoder = SSEDecoder(limit)
    pace = Pacer()
    while True:
        chunk = response.read1(read_size)
        if not chunk:
            yield from decoder.finish()
            return
        for item in decoder.feed(chunk):
            yield item
            pace()
        pace()


class Pacer:
    """Call it often; it lets other greenlets run once the hub has run ``YIELD_EVERY``
    without polling for I/O."""

    __slots__ = ("last",)

    def __init__(self):
        self.last = time.monotonic()

    def __call__(self):
        if overdue(YIELD_EVERY):  # since the hub last polled, whoever ran (core/pacing.py)
            breathe()  # not sleep(0): stdin must be polled too (core/pacing.py)
            self.last = time.monotonic()
