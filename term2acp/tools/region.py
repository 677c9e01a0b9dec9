"""Big files: where two versions differ, and a patch's plain hunks spliced in, without
splitting either into lines.

The common prefix and suffix are found by comparing slices (C ``memcmp`` on blocks, then
halving inside the first block that differs), so an edit of one line in a 50 MB file
costs a few passes of memory comparison, no Python loop per line. The changed region
is that middle, widened to whole lines with ``CONTEXT`` lines around it: what the tool
call's diff shows for files over ``REGION_OVER`` (smaller files show whole).
"""

BLOCK = 1 << 16
CONTEXT = 3  # lines around the change in a region diff
REGION_OVER = 1 << 20  # characters: larger files get a region diff


def common_prefix(a, b):
    """Length of the longest common prefix of ``a`` and ``b``."""
    size, lo = min(len(a), len(b)), 0
    while lo < size:
        hi = min(size, lo + BLOCK)
        if a[lo:hi] != b[lo:hi]:
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if a[lo:mid] == b[lo:mid]:
                    lo = mid
                else:
                    hi = mid
            return lo
        lo = hi
    return size


def common_suffix(a, b, most):
    """Length of the longest common suffix of ``a`` and ``b``, at most ``most``."""
    la, lb, lo = len(a), len(b), 0
    while lo < most:
        hi = min(most, lo + BLOCK)
        if a[la - hi:la - lo] != b[lb - hi:lb - lo]:
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if a[la - mid:la - lo] == b[lb - mid:lb - lo]:
                    lo = mid
                else:
                    hi = mid
            return lo
        lo = hi
    return most


def changed(old, new):
    """``(start, old_end, new_end, first_line)``: ``old[start:old_end]`` became
    ``new[start:new_end]``, whole lines with CONTEXT lines around; ``first_line`` is the
    1-based line of the first changed character."""
    prefix = common_prefix(old, new)
    suffix = common_suffix(old, new, min(len(old), len(new)) - prefix)
    first_line = old.count("\n", 0, prefix) + 1
    start = old.rfind("\n", 0, prefix) + 1
    for _ in range(CONTEXT):
        if start == 0:
            break
        start = old.rfind("\n", 0, start - 1) + 1
    end = old.find("\n", len(old) - suffix)  # old's tail from here on is new's too
    for _ in range(CONTEXT):
        if end == -1:
            break
        end = old.find("\n", end + 1)
    end = len(old) if end == -1 else end
    return start, end, end + len(new) - len(old), first_line


def first_line(old, new):
    """1-based line of ``old`` where ``new`` first differs."""
    return old.count("\n", 0, common_prefix(old, new)) + 1


def diff_item(real, old, new):
    """The tool call's diff: whole for a new or small file, else the changed region."""
    if old is None or new is None or len(old) <= REGION_OVER:
        return {"type": "diff", "path": real, "old": old, "new": new}
    start, old_end, new_end, _ = changed(old, new)
    return {"type": "diff", "path": real, "old": old[start:old_end], "new": new[start:new_end],
            "line": old.count("\n", 0, start) + 1}  # where the region starts


def splice_hunks(text, hunks):
    """A big file's text after a patch's hunks when each hunk's old lines occur exactly
    once in the file, whole lines, after the previous hunk (under its ``@@`` line, if
    any): found by ``str.find``/``count`` and spliced, never split into lines. None when
    any hunk needs more (a loose match, two candidates, an addition or an end-of-file
    hunk, CRLF line endings): ``patch.apply_hunks`` decides those."""
    if len(text) <= REGION_OVER:
        return None
    places = hunk_places(text, hunks)
    if places is None:
        return None
    pieces, cursor = [], 0
    for at, size, new in places:
        pieces += [text[cursor:at], new]
        cursor = at + size
    return "".join(pieces + [text[cursor:]])


def hunk_places(text, hunks):
    """``[(at, old length, new)]`` of the hunks in ``text`` (a ``str``, or the bytes of
    valid UTF-8: ``tools/bigedit.py``), in order, under :func:`splice_hunks`' rules; None
    when any hunk needs more."""
    as_text = (lambda words: words.encode("utf-8")) if isinstance(text, bytes) else str
    newline = as_text("\n")
    if as_text("\r") in text:
        return None
    places, cursor = [], 0
    for hunk in hunks:
        if not hunk.old or hunk.at_end:
            return None
        block = as_text("\n".join(hunk.old))
        if text.count(block) != 1:
            return None
        at = text.find(block)
        end = at + len(block)
        if at < cursor or (at and text[at - 1:at] != newline) or (
                end < len(text) and text[end:end + 1] != newline):
            return None
        if hunk.header and not _line_in(text, as_text(hunk.header), cursor, at, newline):
            return None
        places.append((at, len(block), as_text("\n".join(hunk.new))))
        cursor = end
    return places


def _line_in(text, line, start, end, newline):
    """True when ``line`` is a whole line of ``text`` between ``start`` and ``end``."""
    at = text.find(line, start, end)
    while at != -1:
        after = at + len(line)
        if (at == 0 or text[at - 1:at] == newline) and (
                after == len(text) or text[after:after + 1] == newline):
            return True
        at = text.find(line, at + 1, end)
    return False
