"""edit_file's forgiving match: whole lines equal once whitespace is normalised.

Used only when ``old_text`` matches nowhere exactly. A candidate is a run of whole lines
of the file, as many as ``old_text`` has, where every line equals the corresponding line
of ``old_text`` once trailing whitespace is ignored and each side's common indentation
is removed (a block copied with its indentation shifted consistently, e.g. from a
dedented excerpt, or with trailing spaces lost). Blank lines match blank lines. The
replacement keeps the file's own indentation: ``new_text`` is shifted by the same
amount, its lines that start with the old text's common indentation get the file's in
its place. Line endings are the caller's business (it converts them first).
"""

from typing import NamedTuple

SHOWN_LINES = 6  # lines of one candidate shown in a failure


class Candidate(NamedTuple):
    start: int  # character offsets in the text
    end: int
    first_line: int  # 1-based
    last_line: int
    indent: str  # the file's common indentation of the matched lines


def _lines(text):
    """Lines of ``text`` without a final empty one (a trailing newline)."""
    lines = text.split("\n")
    return lines[:-1] if len(lines) > 1 and lines[-1] == "" else lines


def _indent(line):
    return line[:len(line) - len(line.lstrip(" \t"))]


def _common(lines):
    """The indentation string every non-blank line starts with (the shortest one's)."""
    indents = [_indent(line) for line in lines if line.strip()]
    if not indents:
        return ""
    base = min(indents, key=len)
    return base if all(i.startswith(base) for i in indents) else ""


def _key(lines):
    base = len(_common(lines))
    return [line[base:].rstrip() if line.strip() else "" for line in lines]


def candidates(text, old):
    """Every place where ``old`` matches ``text`` after normalising whitespace."""
    want = _key(_lines(old.strip("\n")))
    if not any(want):
        return []
    lines = text.split("\n")
    offsets, pos = [], 0
    for line in lines:
        offsets.append(pos)
        pos += len(line) + 1
    found, size = [], len(want)
    first = want[0]
    for i in range(len(lines) - size + 1):
        if lines[i].strip() != first.strip():
            continue
        window = lines[i:i + size]
        if _key(window) == want:
            end = offsets[i + size - 1] + len(lines[i + size - 1])
            found.append(Candidate(offsets[i], end, i + 1, i + size, _common(window)))
    return found


def reindent(old, new, indent):
    """``new`` shifted as the match was: lines starting with ``old``'s common indentation
    get ``indent`` in its place; trailing newlines at either end are dropped (the match
    covers whole lines without its final newline)."""
    base = _common(_lines(old.strip("\n")))
    out = []
    for line in new.strip("\n").split("\n"):
        if line.strip() and line.startswith(base):
            line = indent + line[len(base):]
        out.append(line)
    return "\n".join(out)


def describe(text, found, limit=3):
    """The candidates as the model should see them: line ranges and their text."""
    lines = text.split("\n")
    parts = []
    for cand in found[:limit]:
        shown = lines[cand.first_line - 1:min(cand.last_line, cand.first_line - 1 + SHOWN_LINES)]
        more = "\n    ..." if cand.last_line - cand.first_line + 1 > SHOWN_LINES else ""
        body = "\n".join(f"    {line}" for line in shown)
        where = f"line {cand.first_line}" if cand.first_line == cand.last_line \
            else f"lines {cand.first_line}-{cand.last_line}"
        parts.append(f"  {where}:\n{body}{more}")
    if len(found) > limit:
        parts.append(f"  ... and {len(found) - limit} more")
    return "\n".join(parts)
