"""Text that every sink can hold: SQLite, JSON on stdout and provider requests are UTF-8,
and a lone surrogate (JSON can carry one as an escape) cannot be encoded there."""

import re

_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub_text(text):
    """``text`` with every lone surrogate replaced by U+FFFD (``None`` stays ``None``)."""
    if text is None or text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
