"""A big file's edit without its text: edit_file's exact edit, apply_patch's plain hunks
spliced into the bytes.

Decoding a 50 MB file, replacing in its text and encoding the result each make a new
50 MB object in one C call, and filling fresh memory holds the interpreter 20-30 ms
a time even in a thread (``core/offhub.py``), long enough for the hub to miss its goal.
Here the file stays bytes: it is checked to be UTF-8 a step at a time, the old text's
bytes are found with ``bytes.find``/``count`` (in valid UTF-8 the matches of valid UTF-8
text are exactly those of the decoded text), and the new content is the file's own
bytes around the replacements, as pieces written one after the other
(``tools/atomic.py``), never joined. The diff is the changed region, decoded alone,
with the lines around it that :func:`term2acp.tools.region.changed` shows.

Only the plain cases: a single edit whose ``old_text`` occurs exactly (once, or with
``replace_all`` up to ``MAX_PLACES`` times), and the hunks ``region.splice_hunks``
takes. Anything else (no exact match: the forgiving match; several matches without
``replace_all``: an error naming their lines; several edits, each applied to the result
of the one before; a loose hunk) returns None, and the text path does it.
"""

import codecs

from term2acp.core.offhub import STEP, decode, newlines
from term2acp.tools.base import ToolError
from term2acp.tools.region import CONTEXT, common_prefix, common_suffix, hunk_places

MAX_PLACES = 64  # replacements spliced in pieces; more are made on the text
WINDOW = 4096  # bytes around the first and last change where the diff's edges are sought


def not_utf8(shown, at):
    """The refusal of a file that is not UTF-8 (the text path's too)."""
    return ToolError(f"{shown} is not valid UTF-8 (byte {at}); editing it as text would "
                     "corrupt it. Use the shell to change it.")


def text_of(pieces):
    """The text of a spliced file's pieces (for the editor, which writes text)."""
    return decode(b"".join(pieces))


def _check_utf8(data, shown):
    bad = utf8_error(data)
    if bad is not None:
        raise not_utf8(shown, bad)


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
    the 1-based line where they start. Raises ToolError for a file that is not UTF-8."""
    _check_utf8(data, shown)
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
    return _spliced(data, [(at, len(old_b), new_b) for at in places], count)


def splice_hunks(data, hunks, shown):
    """``(pieces, hunks, first_line, diff_region)`` of a patch's hunks on ``data`` (a big
    file's bytes) when ``region.splice_hunks`` would take them (each hunk's old lines
    once, whole lines, in order, under its ``@@`` line); None when any hunk needs more
    (``patch.apply_hunks`` on the text). Raises ToolError for a file that is not UTF-8."""
    _check_utf8(data, shown)
    places = hunk_places(data, hunks)
    return None if places is None else _spliced(data, places, len(hunks))


def _spliced(data, changes, count):
    """``(pieces, count, first_line, diff_region)``: ``changes`` (``(at, old length, new
    bytes)``, in order, apart) made to ``data``; None when the diff region cannot be told
    from the changed blocks alone (:func:`_region`)."""
    found = _region(data, changes)
    if found is None:
        return None
    view, pieces, cursor = memoryview(data), [], 0
    for at, size, new_b in changes:
        pieces += [view[cursor:at], new_b]
        cursor = at + size
    pieces.append(view[cursor:])
    return pieces, count, *found


def _region(data, changes):
    """``(first_line, (old, new, line))`` as ``region.changed`` finds them on the texts.
    The texts' common prefix and suffix are sought from the first and the last change,
    over at most ``WINDOW`` bytes of the text around them that both texts share; None when
    that is not enough (a repetitive text: the text path decides)."""
    (at, size, new_b), (last_at, last_size, last_new) = changes[0], changes[-1]
    stop = changes[1][0] if len(changes) > 1 else len(data)
    rest = data[at + size:min(at + size + WINDOW, stop)]  # after the block, in both texts
    old_side, new_side = data[at:at + size] + rest, new_b + rest
    most = min(len(old_side), len(new_side))
    same = common_prefix(old_side[:most], new_side[:most])
    if same == most:
        return None
    prefix = at + same
    begin = changes[-2][0] + changes[-2][1] if len(changes) > 1 else 0
    head = data[max(begin, last_at - WINDOW):last_at]  # before the block, in both texts
    old_side = head + data[last_at:last_at + last_size]
    new_side = head + last_new
    most = min(len(old_side), len(new_side))
    tail = common_suffix(old_side, new_side, most)
    suffix = len(data) - last_at - last_size + tail
    if len(changes) == 1:  # the suffix stops where the prefix ends
        bound = min(len(data), len(data) - size + len(new_b)) - prefix
        if tail == most and suffix < bound:
            return None
        suffix = min(suffix, bound)
    elif tail == most:
        return None
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
    after, cursor = [], start  # every change lies between start and end
    for change_at, change_size, change_new in changes:
        after += [data[cursor:change_at], change_new]
        cursor = change_at + change_size
    after.append(data[cursor:end])
    line = first_line - newlines(data, start, prefix)
    return first_line, (data[start:end].decode("utf-8"), b"".join(after).decode("utf-8"), line)
