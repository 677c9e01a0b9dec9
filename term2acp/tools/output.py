"""A command's output: what the model is given (a bounded head and tail, cut in the
middle with a note) and what the editor is shown (the terminal's events, up to a cap).

Shared by the foreground ``shell`` and ``run_code`` calls and the background processes of
``tools/processes.py``.
"""

import logging

from term2acp.core.events import TerminalOutput

log = logging.getLogger(__name__)

DISPLAY_CAP = 16 * 1024 * 1024  # bytes of output streamed to the editor per command


class Capture:
    """The first and last ``cap`` / 2 bytes of a stream and its total size: bounded."""

    def __init__(self, cap):
        self.cap = max(int(cap), 2)
        self.head_room = self.cap // 2
        self.tail_room = self.cap - self.head_room
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data):
        self.total += len(data)
        if len(self.head) < self.head_room:
            take = self.head_room - len(self.head)
            self.head += data[:take]
            data = data[take:]
        if data:
            self.tail += data
            if len(self.tail) > self.tail_room:
                del self.tail[:len(self.tail) - self.tail_room]

    def text(self, limit=None, terminal=False):
        """Decoded output; when cut, a line in the middle says how much is missing.
        ``limit``: show at most that many bytes (half head, half tail) of what is kept;
        ``terminal``: the output of a pseudo-terminal (its CR LF line ends become LF)."""
        head, tail = bytes(self.head), bytes(self.tail)
        if limit is not None and len(head) + len(tail) > limit:
            keep = max(int(limit), 2)
            joined = head + tail if self.total == len(head) + len(tail) else None
            if joined is not None:  # nothing cut yet: cut the whole in its middle
                head, tail = joined[:keep // 2], joined[len(joined) - (keep - keep // 2):]
            else:
                head, tail = head[:keep // 2], tail[len(tail) - (keep - keep // 2):]
        cut, sizes = self.total - len(head) - len(tail), (len(head), len(tail))
        head, tail = _decode(head, terminal), _decode(tail, terminal)
        if cut <= 0:
            return head + tail
        return (f"{head}\n[... {cut:,} bytes of output cut; showing the first "
                f"{sizes[0]:,} and the last {sizes[1]:,} bytes ...]\n{tail}")


def _decode(data, terminal):
    text = data.decode("utf-8", "replace")
    return text.replace("\r\n", "\n") if terminal else text


class TerminalStream:
    """Feeds a capture and streams chunks to the editor up to DISPLAY_CAP bytes."""

    def __init__(self, emit, terminal_id, capture):
        self.emit, self.terminal_id, self.capture = emit, terminal_id, capture
        self.shown = 0

    def write(self, data):
        self.capture.add(data)
        if self.shown >= DISPLAY_CAP:
            return
        room = DISPLAY_CAP - self.shown
        chunk = data[:room]
        self.shown += len(chunk)
        if self.shown >= DISPLAY_CAP:
            chunk += b"\n[term2acp: further output is not displayed]\n"
        self.emit(TerminalOutput(terminal_id=self.terminal_id, data=chunk))


def emit_quietly(emit, event):
    try:
        emit(event)
    except Exception:  # noqa: BLE001 - reporting must not mask the real outcome
        log.exception("could not report %s", type(event).__name__)
