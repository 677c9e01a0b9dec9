"""grep's engine: where a pattern matches in one file's bytes, in bounded RE2 calls, and
how the hits print (matches, context lines, counts).

Every RE2 call searches a bounded slice (see WORK) and the pacer yields between calls,
so no file or pattern holds the hub. Line mode: slices of whole lines (a match never
spans lines), or windows of a line longer than a slice. Multiline mode: slices cut at
line ends that overlap by a quarter, so a match up to a quarter of a slice long (several
KiB) is always found whole; ``.`` still stops at a newline unless the pattern says
``(?s)``, as in ripgrep's ``--multiline``.
"""

import os
import stat

from term2acp.tools.files import SNIFF

MAX_GREP_BYTES = 2 * 1024 * 1024  # larger files are skipped by grep
MAX_LINE_CHARS = 300  # a reported grep line is cut here
# One RE2 call costs at worst about 35 ns per byte per program instruction (when its DFA
# gives up and it falls back to the NFA), so each call gets WORK / program size bytes.
WORK = 2_000_000  # byte-instructions per RE2 call (about 70 ms at worst)
MIN_SLICE, MAX_SLICE = 512, 64 * 1024


def read_regular_fd(opener, state, limit=MAX_GREP_BYTES):
    """``(data, size)`` of the regular file ``opener()`` opens (data None above ``limit``);
    None for anything else, or when it changed while being opened (counted)."""
    try:
        fd = opener()
    except OSError:
        state["changed"] += 1
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        if st.st_size > limit:
            return None, st.st_size
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        return (data if len(data) <= limit else None), st.st_size
    finally:
        os.close(fd)


def searchable(read, state):
    """UTF-8 bytes of a file worth searching (bad bytes as U+FFFD), else b"": ``read`` is
    what :func:`read_regular_fd` returned for it."""
    if read is None:
        return b""
    if read[0] is None:
        state["big"] += 1
        return b""
    if b"\0" in read[0][:SNIFF]:
        state["binary"] += 1
        return b""
    try:
        read[0].decode("utf-8")
        return read[0]
    except UnicodeDecodeError:
        return read[0].decode("utf-8", errors="replace").encode("utf-8")


def _step(regex):
    return max(MIN_SLICE, min(MAX_SLICE, WORK // max(1, regex.programsize)))


def matching_lines(regex, data, limit, pacer):
    """``(first byte, end byte)`` of each line of ``data`` with a match, at most
    ``limit`` (line mode)."""
    step = _step(regex)
    pos, size = 0, len(data)
    while pos < size and limit > 0 and pacer.tick():
        end = size if pos + step >= size else data.rfind(b"\n", pos, pos + step)
        if end == -1:  # the line at pos is longer than a slice
            end = data.find(b"\n", pos)
            start = _search_long(regex, data, pos, size if end == -1 else end, step, pacer)
        else:
            match = regex.search(data, pos, end)
            start = None if match is None else match.start()
        if start is None:
            pos = end + 1 if end != -1 else size
            continue
        first, last = data.rfind(b"\n", 0, start) + 1, data.find(b"\n", start)
        last = size if last == -1 else last
        yield first, last
        limit -= 1
        pos = last + 1


def _search_long(regex, data, pos, end, step, pacer):
    """Where the first match in the long line ``data[pos:end]`` starts, or None.

    Windows of ``step`` bytes overlap by a quarter, so a match up to ``step // 4`` bytes
    long is always found; a longer match that straddles two windows can be missed.
    Anchors and word boundaries still see the whole line.
    """
    advance = step - step // 4
    while pos < end and pacer.tick():
        match = regex.search(data, pos, min(end, pos + step))
        if match is not None:
            return match.start()
        if pos + step >= end:
            return None
        pos += advance
    return None


def matching_spans(regex, data, limit, pacer):
    """``(first byte, end byte)`` of the lines each match spans, at most ``limit``
    (multiline mode; module docstring)."""
    step = _step(regex) * 4
    overlap = step // 4
    pos, size = 0, len(data)
    while pos < size and limit > 0 and pacer.tick():
        end = size
        if pos + step < size:
            cut = data.rfind(b"\n", pos + overlap, pos + step)
            end = cut + 1 if cut != -1 else min(size, pos + step)
        match = regex.search(data, pos, end)
        if match is None or match.end() == match.start():
            if match is not None:  # an empty match: look again from the next line
                nl = data.find(b"\n", match.start())
                pos = size if nl == -1 else nl + 1
                continue
            if end >= size:
                return
            back = data.rfind(b"\n", pos, end - overlap)
            pos = back + 1 if back != -1 and back + 1 > pos else end
            continue
        start, stop = match.start(), match.end()
        first = data.rfind(b"\n", 0, start) + 1
        tail = stop - 1 if data[stop - 1:stop] == b"\n" else stop
        last = data.find(b"\n", tail)
        yield first, size if last == -1 else last
        limit -= 1
        pos = stop


def line_numbers(data, spans, pacer):
    """``(first line, last line)``, 1-based, of each byte span (in order)."""
    lineno, counted = 1, 0
    for first, last in spans:
        lineno += data.count(b"\n", counted, first)
        counted = first
        yield lineno, lineno + data.count(b"\n", first, last)
        pacer.tick()


def cut(line):
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + "…"


def content_lines(shown, data, ranges, before, after):
    """Output lines for one file: ``shown:N: text`` for matched lines, ``shown-N- text``
    for context lines, ``--`` between groups that do not touch (ripgrep's layout).
    ``ranges`` are the matched ``(first line, last line)`` pairs, in order."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"" and data.endswith(b"\n"):
        lines.pop()
    matched = set()
    for first, last in ranges:
        matched.update(range(first, last + 1))
    wanted = set()
    for first, last in ranges:
        wanted.update(range(max(1, first - before), min(len(lines), last + after) + 1))
    out, previous = [], None
    for number in sorted(wanted):
        if previous is not None and number != previous + 1 and (before or after):
            out.append("--")
        text = lines[number - 1].decode("utf-8", "replace").rstrip("\r")
        mark = ":" if number in matched else "-"
        out.append(f"{shown}{mark}{number}{mark} {cut(text)}")
        previous = number
    return out
