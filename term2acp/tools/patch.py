"""The Codex patch format: parsing, and applying one file's hunks in memory.

A patch is an envelope of file operations::

    *** Begin Patch
    *** Add File: path          every following line is "+" and a line of the new file
    *** Delete File: path       nothing follows
    *** Update File: path       optionally "*** Move to: new path", then hunks
    @@ optional header line     (a line of the file that comes before the hunk)
     context line
    -removed line
    +added line
    *** End of File             (optional: the hunk ends at the end of the file)
    *** End Patch

A hunk is located by its context and removed lines, searched from where the previous
hunk ended: exactly first, then ignoring trailing whitespace, then ignoring surrounding
whitespace, then also treating typographic punctuation as ASCII. The first place that
matches wins (hunks come in file order), but a hunk without an ``@@`` line that matches
several places is refused with their lines, as edit_file refuses an ambiguous edit. A unified-diff ``@@ -1,3 +1,4 @@`` range is
accepted as a bare ``@@``: line numbers are never trusted. Everything that does not
parse or apply raises :class:`PatchError` with a message that names the line or the hunk
and says why, for the model.
"""

import re
from dataclasses import dataclass, field

BEGIN, END = "*** Begin Patch", "*** End Patch"
ADD, DELETE, UPDATE, MOVE = "*** Add File: ", "*** Delete File: ", "*** Update File: ", \
    "*** Move to: "
END_OF_FILE = "*** End of File"
_RANGE = re.compile(r"-\d+(,\d+)? \+\d+(,\d+)? @@")  # a unified diff's hunk range
# Typographic characters models and editors swap for ASCII ones.
_PUNCT = str.maketrans({
    "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-", "\u2212": "-",
    "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'",
    "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"',
    "\u00a0": " ", "\u2002": " ", "\u2003": " ", "\u2009": " ", "\u202f": " ", "\u3000": " "})
# How a hunk's lines may differ from the file's and still locate it, strictest first.
_LEVELS = (None, str.rstrip, str.strip, lambda s: s.strip().translate(_PUNCT))
SHOWN = 120  # characters of one line quoted in a message


class PatchError(ValueError):
    """The patch does not parse or a hunk does not apply; the message is for the model."""


@dataclass
class Hunk:
    number: int  # 1-based within its file
    header: str  # the @@ line's text ("" for none)
    old: list = field(default_factory=list)  # context and removed lines, in order
    new: list = field(default_factory=list)  # context and added lines, in order
    ops: list = field(default_factory=list)  # (" " | "-" | "+", text), in order
    at_end: bool = False  # "*** End of File": the hunk ends at the end of the file
    line: int = 0  # where the hunk starts in the patch (1-based), for messages
    blank: int = 0  # bare empty lines at its end so far (dropped if nothing follows)

    @property
    def changes(self):
        return self.old != self.new


@dataclass
class FileOp:
    action: str  # "add", "delete" or "update"
    path: str
    move_to: str | None = None
    lines: list = field(default_factory=list)  # add: the new file's lines
    hunks: list = field(default_factory=list)  # update


def quote(line):
    line = line if len(line) <= SHOWN else line[:SHOWN] + "…"
    return repr(line)


def parse(text):
    """The file operations of a patch, in order; PatchError naming the line otherwise."""
    lines = text.strip().replace("\r\n", "\n").split("\n")
    if lines[0].strip() != BEGIN:
        raise PatchError(f"the patch must start with the line {BEGIN!r} (it starts with "
                         f"{quote(lines[0])}) and end with {END!r}.")
    if len(lines) < 2 or lines[-1].strip() != END:
        raise PatchError(f"the patch must end with the line {END!r} (it ends with "
                         f"{quote(lines[-1])}).")
    ops, i, body = [], 1, lines[:-1]
    while i < len(body):
        line = body[i]
        if not line.strip():
            i += 1
            continue
        if line.startswith(ADD):
            op, i = _parse_add(body, i)
        elif line.startswith(DELETE):
            op, i = FileOp("delete", _path(line, DELETE, i)), i + 1
        elif line.startswith(UPDATE):
            op, i = _parse_update(body, i)
        else:
            raise PatchError(f"patch line {i + 1}: expected '*** Add File: ', '*** Update "
                             f"File: ' or '*** Delete File: ', found {quote(line)}.")
        ops.append(op)
    if not ops:
        raise PatchError("the patch has no file operations.")
    _no_duplicates(ops)
    return ops


def _path(line, marker, i):
    path = line[len(marker):].strip()
    if not path:
        raise PatchError(f"patch line {i + 1}: {marker.strip()!r} needs a path.")
    return path


def _is_op(line):
    return line.startswith((ADD, DELETE, UPDATE))


def _parse_add(lines, i):
    op = FileOp("add", _path(lines[i], ADD, i))
    i, blank = i + 1, 0
    while i < len(lines) and not _is_op(lines[i]):
        line = lines[i]
        if line.startswith("+"):
            op.lines += [""] * blank + [line[1:]]
            blank = 0
        elif not line.strip():  # a bare empty line: empty in the file unless last
            blank += 1
        else:
            raise PatchError(f"patch line {i + 1}: every line of an added file starts with "
                             f"'+' ({op.path}); found {quote(line)}.")
        i += 1
    return op, i


def _parse_update(lines, i):
    op = FileOp("update", _path(lines[i], UPDATE, i))
    i += 1
    if i < len(lines) and lines[i].startswith(MOVE):
        op.move_to = _path(lines[i], MOVE, i)
        i += 1
    hunk = None
    while i < len(lines) and not _is_op(lines[i]):
        line = lines[i]
        if line.startswith("@@"):
            header = line[2:].strip()
            header = "" if _RANGE.fullmatch(header) else header
            hunk = Hunk(len(op.hunks) + 1, header, line=i + 1)
            op.hunks.append(hunk)
        elif line.strip() == END_OF_FILE:
            if hunk is None:
                raise PatchError(f"patch line {i + 1}: {END_OF_FILE!r} outside a hunk.")
            hunk.at_end = True
        else:
            if hunk is None:  # the first hunk may leave out its @@ line
                hunk = Hunk(1, "", line=i + 1)
                op.hunks.append(hunk)
            _hunk_line(hunk, line, i, op.path)
        i += 1
    for hunk in op.hunks:
        for _ in range(hunk.blank):  # bare blank lines before the next hunk or operation
            hunk.old.pop()
            hunk.new.pop()
            hunk.ops.pop()
    op.hunks = [h for h in op.hunks if h.old or h.new or h.header]
    if not op.hunks and op.move_to is None:
        raise PatchError(f"'*** Update File: {op.path}' has no hunks; add '@@' hunks with "
                         "context and -/+ lines, or remove the operation.")
    for hunk in op.hunks:
        if not hunk.changes:
            raise PatchError(f"{op.path}, hunk {hunk.number} (patch line {hunk.line}) changes "
                             "nothing: it has no '-' or '+' lines.")
    return op, i


def _hunk_line(hunk, line, i, path):
    mark, rest = line[:1], line[1:]
    if not line.strip():  # a bare empty line: empty context (editors strip the space)
        hunk.old.append("")
        hunk.new.append("")
        hunk.ops.append((" ", ""))
        hunk.blank += 1
        return
    hunk.blank = 0
    hunk.ops.append((mark, rest))
    if mark == " ":
        hunk.old.append(rest)
        hunk.new.append(rest)
    elif mark == "-":
        hunk.old.append(rest)
    elif mark == "+":
        hunk.new.append(rest)
    else:
        raise PatchError(f"patch line {i + 1} ({path}, hunk {hunk.number}): a hunk line starts "
                         f"with ' ' (context), '-' (removed) or '+' (added); found {quote(line)}.")


def _no_duplicates(ops):
    seen = {}
    for op in ops:
        for path in filter(None, (op.path, op.move_to)):
            if path in seen:
                raise PatchError(f"{path} appears in two operations of the patch; put all its "
                                 "changes under one '*** Update File:' with several hunks.")
            seen[path] = op


# ---------------------------------------------------------------- applying hunks
def apply_hunks(text, hunks, shown):
    """The new text of a file after its hunks, keeping its line endings; PatchError naming
    the hunk that does not apply. ``notes`` lists hunks located only loosely."""
    crlf = "\r\n" in text
    body = text.replace("\r\n", "\n") if crlf else text
    lines = body.split("\n")
    final_newline = lines[-1] == "" and len(lines) > 1
    if final_newline:
        lines.pop()
    edits, cursor, loose, views = [], 0, [], _Views(lines)
    for hunk in hunks:
        if hunk.header:
            at = _seek(views, [hunk.header], cursor, False)
            if at is None:
                raise PatchError(_header_missing(hunk, shown, cursor))
            cursor = at[0] + 1
        if not hunk.old:  # pure addition: after the header, else at the end of the file
            edits.append((cursor if hunk.header else len(lines), 0, hunk.new))
            continue
        old = hunk.old
        found = _seek(views, old, cursor, hunk.at_end)
        if found is None and old[-1] == "" and len(old) > 1:  # a trailing blank context line
            old = old[:-1]
            found = _seek(views, old, cursor, hunk.at_end)
        if found is None:
            raise PatchError(_not_found(hunk, views, cursor, shown))
        at, level = found
        if not hunk.header and not (hunk.at_end and at == len(lines) - len(old)):
            _only_place(hunk, views, old, cursor, level, shown)
        if level:
            loose.append(hunk.number)
        edits.append((at, len(old), _replacement(hunk, lines, at, len(old))))
        cursor = at + len(old)
    for at, count, new in reversed(edits):
        lines[at:at + count] = new
    out = "\n".join(lines) + ("\n" if final_newline or not lines else "")
    return (out.replace("\n", "\r\n") if crlf else out), loose


def _replacement(hunk, lines, at, count):
    """The hunk's new lines for the ``count`` file lines at ``at``: context lines stay as
    the file has them (they may have matched only loosely), added lines as written."""
    out, index = [], at
    for mark, text in hunk.ops:
        if mark == "+":
            out.append(text)
        elif index < at + count:
            if mark == " ":
                out.append(lines[index])
            index += 1
    return out


class _Views:
    """A file's lines as each matching level sees them, normalised once per file."""

    def __init__(self, lines):
        self.lines = lines
        self._views = {0: lines}

    def __getitem__(self, level):
        view = self._views.get(level)
        if view is None:
            norm = _LEVELS[level]
            view = self._views[level] = [norm(line) for line in self.lines]
        return view


def _seek(views, pattern, start, at_end):
    """``(index, level)`` of the first place at or after ``start`` where ``pattern``
    matches at the loosest level needed (0 exact), or None. ``at_end`` tries the end of
    the file first."""
    size, total = len(pattern), len(views.lines)
    if size > total:
        return None
    last = total - size
    for level, norm in enumerate(_LEVELS):
        want = pattern if norm is None else [norm(p) for p in pattern]
        lines, first = views[level], want[0]
        starts = ([last] if at_end and last >= start else []) + [start]
        for begin in starts:
            i = begin
            while i <= last:
                try:
                    i = lines.index(first, i, last + 1)
                except ValueError:
                    break
                if lines[i:i + size] == want:
                    return i, level
                if at_end and begin == last:
                    break
                i += 1
    return None


def _only_place(hunk, views, old, start, level, shown):
    """A hunk without an ``@@`` line whose lines match several places from ``start`` is
    ambiguous: PatchError naming the candidates' lines (nothing is applied)."""
    want = old if not level else [_LEVELS[level](p) for p in old]
    lines, size, places = views[level], len(old), []
    for i in range(start, len(lines) - size + 1):
        if lines[i] == want[0] and lines[i:i + size] == want:
            places.append(f"{i + 1}-{i + size}" if size > 1 else f"{i + 1}")
    if len(places) > 1:
        raise PatchError(
            f"{shown}, hunk {hunk.number} (patch line {hunk.line}): its lines match "
            f"{len(places)} places (lines {', '.join(places[:10])}). Nothing was changed. "
            "Add context lines that occur only at the place to change, or an '@@ <line>' "
            "header naming a line just before it.")


def _header_missing(hunk, shown, cursor):
    after = f" after line {cursor}" if cursor else ""
    return (f"{shown}, hunk {hunk.number} (patch line {hunk.line}): its '@@ {hunk.header}' line "
            f"was not found in the file{after}. Nothing was changed. Use a line copied from "
            "the file after '@@', or a bare '@@' with enough context lines.")


def _not_found(hunk, views, cursor, shown):
    """Why a hunk's old lines are not in the file: the closest place and its first
    differing line, so the model can fix the hunk without re-reading blindly."""
    old, lines, loose = hunk.old, views.lines, views[len(_LEVELS) - 1]
    want = [_LEVELS[-1](p) for p in old]
    best, best_len = None, 0
    for i in range(cursor, len(lines)):
        if loose[i] != want[0]:
            continue
        run = 0
        while run < len(old) and i + run < len(lines) and loose[i + run] == want[run]:
            run += 1
        if run > best_len:
            best, best_len = i, run
            if run == len(old):
                break
    after = f" after line {cursor} (where the previous hunk ended)" if cursor else ""
    head = (f"{shown}, hunk {hunk.number} (patch line {hunk.line}) does not apply: its "
            f"{len(old)} context and '-' lines were not found in the file{after}. Nothing was "
            "changed.")
    if best is None:
        return (f"{head} Its first line {quote(old[0])} occurs nowhere there. Read the file "
                "again and copy the context lines exactly.")
    end = best + best_len
    found = quote(lines[end]) if end < len(lines) else "the end of the file"
    return (f"{head} The closest place is line {best + 1}: {best_len} line"
            f"{'s' * (best_len != 1)} match, then the hunk expects {quote(old[best_len])} "
            f"where the file has {found} (line {end + 1}). Read the file again and fix that "
            "hunk.")
