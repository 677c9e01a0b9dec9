"""JSON-RPC 2.0 messages: what a route is, encoding and strict decoding, ids, the envelope
checks and error responses. Pure functions of messages; the endpoint (``endpoint.py``)
does the dispatch."""

import json
import math
import re

from term2acp.core.nesting import MAX_DEPTH, may_be_too_deep, too_deep
from term2acp.rpc.errors import InvalidRequestError

CANCEL_REQUEST = "$/cancel_request"
_SURROGATE = re.compile("[\ud800-\udfff]")


class Route:
    """What the router returns for a method.

    ``load(params)`` turns raw params into handler arguments (raising :class:`RpcError`),
    ``handler(value)`` does the work and returns a JSON-serialisable result, ``inline``
    runs it in the reader greenlet (only for short, non-blocking handlers). ``quick``: the
    answer reports no state (a read), so it need not wait until what was reported before
    it is stored, and may overtake queued lines (``Writer.put_quick``).
    """

    __slots__ = ("handler", "load", "inline", "mark", "quick")

    def __init__(self, handler, load=None, inline=False, mark=None, quick=False):
        self.handler = handler
        self.load = load or (lambda params: params)
        self.inline = inline
        # mark(value) runs in the reader, before the next line is read, even when the
        # handler runs in its own greenlet: what must take effect in reading order (a
        # session/close marks the session cancelled before an answer read after it).
        self.mark = mark
        self.quick = quick


def _reject_constant(name):
    raise ValueError(f"{name} is not valid JSON")


def decode(text):
    return json.loads(text, parse_constant=_reject_constant)


_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


def encode(message):
    """One message as a UTF-8 line.

    A lone surrogate (a prompt can carry one as a ``\\udXXX`` escape) becomes U+FFFD:
    neither raw (invalid UTF-8) nor escaped (strict parsers such as serde_json reject a
    lone surrogate escape) can be sent."""
    text = _JSON(message)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text).encode("utf-8") + b"\n"


def nests_too_deep(line, message, limit=MAX_DEPTH):
    return may_be_too_deep(line, limit) and too_deep(message, limit)


def valid_id(value):
    if value is None or isinstance(value, str):
        return True
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value)


def id_key(value):
    return (type(value).__name__ if not isinstance(value, (int, float)) else "num", value)


PARAMS_SHAPE = InvalidRequestError('"params" must be an object or an array')


def structured(params):
    return params is None or isinstance(params, (dict, list))


def envelope_error(msg):
    """The error response for a request or notification whose envelope is not JSON-RPC
    2.0 (``jsonrpc``, ``method``, ``id``), or None."""
    msg_id = msg.get("id")
    if msg.get("jsonrpc") != "2.0":
        return error_response(msg_id if valid_id(msg_id) else None,
                               InvalidRequestError('"jsonrpc" must be exactly "2.0"'))
    if not isinstance(msg["method"], str):
        return error_response(msg_id if valid_id(msg_id) else None,
                               InvalidRequestError('"method" must be a string'))
    if "id" in msg and not valid_id(msg_id):
        return error_response(None, InvalidRequestError('"id" must be a string, a number or null'))
    return None


def error_response(msg_id, error):
    return {"jsonrpc": "2.0", "id": msg_id, "error": error.to_wire()}
