"""edit_file on a big file without its text: one exact edit spliced into the bytes.

Decoding a 50 MB file, replacing in its text and encoding the result each make a new
50 MB object in one C call, and filling fresh memory holds the interpreter 20-30 ms
a time even in a thread (``core/offhub.py``), long enough for the hub to miss its goal.
Here the file stays bytes: it is checked to be UTF-8 a step at a time, ``old_text``'s
bytes are found with ``bytes.find``/``count`` (in valid UTF-8 the matches of valid UTF-8
text are exactly those of the decoded text), and the new content is the file's own
bytes around the replacements, as pieces written one after the other
(``tools/atomic.py``), never joined. The diff is the changed region, decoded alone,
with the lines around it that :func:`term2acp.tools.region.changed` shows.

Only the plain case: a single edit whose ``old_text`` occurs exactly (once, or with
``replace_all`` up to ``MAX_PLACES`` times). Anything else (no exact match: the forgiving match; several matches
without ``replace_all``: an error naming their lines; several edits, each applied to the
result of the one before) returns None, and ``edit.apply_edits`` does it on the text.
"""

import codecs

from term2acp.core.offhub import STEP, newlines
from term2acp.tools.base import ToolError
from term2acp.tools.region import CONTEXT, common_prefix, common_suffix

MAX_PLACES = 64  # replacements spliced in pieces; more are made on the text


def utf8_error(data):
    """None when ``data`` is valid UTF-8 (looked at a ``STEP`` at a time), else the
    position of its first invalid byte."""
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    view = memoryview(data)
    try:
        for at in range(0, len(data), STEP):
            piece = bytes(view[at:at + STEP])
            if not piece.isascii() or decoder.getstate()[0]:
                decoder.decode(piece, at + STEP >= len(data))
    except UnicodeDecodeError:
        try:
            bytes(data).decode("utf-8")  # where, in the whole (a file to refuse: rare)
        except UnicodeDecodeError as exc:
            return exc.start
    return None


def splice(data, edit, shown):
    """``(pieces, count, first_line, diff_region)`` of the one ``edit`` on ``data`` (a big
    file's bytes, valid UTF-8), or None when it is not the plain case (module docstring).
    ``diff_region`` is ``(old, new, line)``: the changed lines with context, as text, and
    the 1-based line where they start."""
    old, new = edit["old_text"], edit["new_text"]
    crlf = b"\r" in data and b"\r\n" in data  # one byte is found faster than two
    if crlf and "\r\n" not in old:  # the model writes LF; the file uses CRLF
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
    if old == new:
        raise ToolError("the edit: old_text and new_text are identical. Nothing was changed.")
    old_b, new_b = old.encode("utf-8"), new.encode("utf-8")
    count = data.count(old_b)
    if count == 0 or count > 1 and not edit["replace_all"] or count > MAX_PLACES:
        return None
    places = [data.find(old_b)]
    while len(places) < count:
        places.append(data.find(old_b, places[-1] + len(old_b)))
    view, pieces, cursor = memoryview(data), [], 0
    for at in places:
        pieces += [view[cursor:at], new_b]
        cursor = at + len(old_b)
    pieces.append(view[cursor:])
    return pieces, count, *_region(data, places, old_b, new_b)


def _region(data, places, old_b, new_b):
    """``(first_line, (old, new, line))``: as ``region.changed`` finds them on the text."""
    first, last = places[0], places[-1] + len(old_b)
    same = common_prefix(old_b, new_b)
    prefix = first + same
    suffix = len(data) - last + common_suffix(old_b, new_b, min(len(old_b), len(new_b)) - same)
    first_line = newlines(data, 0, prefix) + 1
    start = data.rfind(b"\n", 0, prefix) + 1
    for _ in range(CONTEXT):
        if start == 0:
            break
        start = data.rfind(b"\n", 0, start - 1) + 1
    end = data.find(b"\n", len(data) - suffix)
    for _ in range(CONTEXT):
        if end == -1:
            break
        end = data.find(b"\n", end + 1)
    end = len(data) if end == -1 else end
    before = data[start:end]
    after = before.replace(old_b, new_b)  # every place lies between start and end
    line = first_line - newlines(data, start, prefix)
    return first_line, (before.decode("utf-8"), after.decode("utf-8"), line)
