"""Secrets the agent holds (API keys, secret-shaped headers): checked once, masked always.

A key pasted with its line break (``sk-...\\r``) must not reach an HTTP header, where the
library refuses it with an exception quoting the whole header. So :func:`clean` strips
surrounding whitespace and refuses a value with any other control character, with a
message naming where the value came from, never the value. Every secret is remembered
(:func:`remember`) and :func:`mask` replaces each one in a text: the log handler
(``diagnostics.py``) and the user-facing error texts go through it, whatever path an
exception took.
"""

import re
import threading

MASK = "***"
MIN_LENGTH = 8  # shorter values are too likely to be ordinary words to be masked
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

_lock = threading.Lock()
_known = set()
_pattern = [None]


class SecretInvalid(ValueError):
    """A secret with a character no HTTP header may hold; the message names its source."""


def clean(value, source, secret=True):
    """``value`` without surrounding whitespace (a pasted newline or CR); SecretInvalid when a
    control character or a non-Latin-1 character remains. A ``secret`` is remembered in
    both forms."""
    if secret:
        remember(value)
    stripped = value.strip()
    if _CONTROL.search(stripped):
        raise SecretInvalid(f"{source} contains a line break or another control character "
                            "inside it; set it again as one line")
    try:
        stripped.encode("latin-1")
    except UnicodeEncodeError:
        raise SecretInvalid(f"{source} contains characters that cannot be sent in an HTTP "
                            "header (not ASCII); check that the whole value was pasted") from None
    if secret:
        remember(stripped)
    return stripped


def remember(*values):
    """Mask these values (and each of their lines) in every later :func:`mask`."""
    added = False
    with _lock:
        for value in values:
            if not isinstance(value, str):
                continue
            for part in {value, value.strip(), *value.splitlines()}:
                part = part.strip()
                if len(part) >= MIN_LENGTH and part not in _known:
                    _known.add(part)
                    added = True
        if added:  # longest first, so a key is masked whole before any part of it
            ordered = sorted(_known, key=len, reverse=True)
            _pattern[0] = re.compile("|".join(map(re.escape, ordered)))


def mask(text):
    """``text`` with every remembered secret replaced by ``***``."""
    pattern = _pattern[0]
    if pattern is None or not isinstance(text, str):
        return text
    return pattern.sub(MASK, text)
