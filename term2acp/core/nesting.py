"""How deep JSON values nest: one bound for the wire edge and for what models send.

Deeper values are refused where they enter (the JSON-RPC reader, a model's tool-call
arguments), so nothing that nests deeper than ``MAX_DEPTH`` reaches the store: replaying
a ~950-level value later fails with RecursionError in every JSON encoder.
"""

import json
import re

MAX_DEPTH = 64
# Characters of one tool call's JSON arguments. Larger ones are refused before they are
# parsed, stored or shown (a 50 MB argument grew the store by ~250 MB and held every read
# behind its writes); 8 Mi leaves room for a 4 MiB file (the edit limit) in JSON escapes.
MAX_ARGUMENT_CHARS = 8 * 1024 * 1024


def too_deep(value, limit=MAX_DEPTH):
    """True when arrays/objects (lists/dicts) nest more than ``limit`` levels; iterative."""
    if not isinstance(value, (dict, list)):
        return False
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        for child in item.values() if isinstance(item, dict) else item:
            if isinstance(child, (dict, list)):
                if depth + 1 > limit:
                    return True
                stack.append((child, depth + 1))
    return False


def may_be_too_deep(text, limit=MAX_DEPTH):
    """Cheap pre-check on the encoded text (str or bytes): False means it cannot be."""
    if isinstance(text, str):
        return text.count("{") + text.count("[") > limit
    return text.count(b"{") + text.count(b"[") > limit


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_SPECIAL = re.compile(r'["{}\[\]]')
SCAN_LIMIT = 64 * 1024  # characters of a too-deep message searched for its id


def top_level_members(text, wanted=("id", "method")):
    """The ``wanted`` members with scalar values of the top-level JSON object ``text``,
    found without parsing what nests inside it (for a message too deep for the parser, so
    its answer can still carry its id); {} when ``text`` is not an object. Only the first
    SCAN_LIMIT characters are searched."""
    start = len(text) - len(text.lstrip())
    if not text[start:start + 1] == "{":
        return {}
    found, depth, index, size = {}, 0, start, min(len(text), SCAN_LIMIT)
    decoder = json.JSONDecoder()
    while index < size and len(found) < len(wanted):
        special = _SPECIAL.search(text, index, size)
        if special is None:
            break
        index = special.start()
        char = text[index]
        if char == '"':
            match = _STRING.match(text, index)
            if match is None:
                return found
            index = match.end()
            if depth == 1:
                after = index + len(text[index:index + 64]) - len(text[index:index + 64].lstrip())
                if text[after:after + 1] == ":":
                    name = json.loads(match.group())
                    value_at = after + 1 + len(text[after + 1:after + 65]) - len(
                        text[after + 1:after + 65].lstrip())
                    if name in wanted and text[value_at:value_at + 1] not in ("{", "["):
                        try:
                            found[name], index = decoder.raw_decode(text, value_at)
                        except ValueError:
                            pass
            continue
        if char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                break
        index += 1
    return found
