"""Text that every sink can hold: SQLite, JSON on stdout and provider requests are UTF-8,
and a lone surrogate (JSON can carry one as an escape) cannot be encoded there; and a
line a person reads (a title) that carries nothing a terminal or an editor acts on."""

import re

_SURROGATE = re.compile("[\ud800-\udfff]")
# What words may not carry into a title: C0/C1 controls (ESC, BEL: a terminal's window
# title, a cleared screen), zero-width and bidi controls (U+202E turns the rest of a line
# around), line and paragraph separators.
UNSHOWN = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]+")


def one_line(text, cap):
    """``text`` for a title: one line, no control characters, at most ``cap`` characters."""
    text = " ".join(UNSHOWN.sub(" ", str(text)).split())
    return text if len(text) <= cap else text[:cap - 1].rstrip() + "\u2026"


def scrub_text(text):
    """``text`` with every lone surrogate replaced by U+FFFD (``None`` stays ``None``)."""
    if text is None or text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
