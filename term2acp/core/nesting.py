"""How deep JSON values nest: one bound for the wire edge and for what models send.

Deeper values are refused where they enter (the JSON-RPC reader, a model's tool-call
arguments), so nothing that nests deeper than ``MAX_DEPTH`` reaches the store: replaying
a ~950-level value later fails with RecursionError in every JSON encoder.
"""

MAX_DEPTH = 64


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
