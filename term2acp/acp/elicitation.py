"""``elicitation/create``: the agent asks the user a question through the editor.

Both faces send the same request (v1 and v2 share the shape): ``{sessionId, toolCallId?,
mode: "form", message, requestedSchema}`` or ``{..., mode: "url", elicitationId, url}``,
and only in the modes the client advertised at ``initialize``
(``capabilities.elicitation.form`` / ``.url`` in v2, ``clientCapabilities.elicitation``
in v1; a mode counts when its key holds an object).

Fail closed, as the permission bridge does (``acp/v2/permissions.py``): an answer
counts only when it is ``accept`` with content that matches the requested schema, or the
user's own ``decline``/``cancel``. A timeout, a disconnect, an error or a malformed
answer is a ``cancel``; an accept whose content does not fit is a ``decline``. A
cancelled turn kills the waiting greenlet: ``Peer.call`` withdraws the request with
``$/cancel_request``.
"""

import logging

import gevent
from marshmallow import ValidationError

from term2acp.acp import methods
from term2acp.acp.schemas.elicitation import CreateElicitationResponseSchema
from term2acp.core import elicitation as el
from term2acp.rpc.errors import DisconnectedError, MethodNotFoundError, RpcError

log = logging.getLogger(__name__)

_RESPONSE = CreateElicitationResponseSchema()
MESSAGE_CAP = 8192


class ElicitationSupport:
    """The elicitation modes a client advertised (``capabilities.elicitation``)."""

    __slots__ = ("form", "url")

    def __init__(self, capabilities):
        given = (capabilities or {}).get("elicitation") if isinstance(capabilities, dict) else None
        given = given if isinstance(given, dict) else {}
        self.form = isinstance(given.get("form"), dict)
        self.url = isinstance(given.get("url"), dict)

    def supports(self, mode):
        return self.form if mode == el.FORM else self.url if mode == el.URL else False


NONE = ElicitationSupport(None)


def request_params(session_id, call_id, question):
    params = {"sessionId": session_id, "mode": question.mode,
              "message": question.message[:MESSAGE_CAP]}
    if call_id:
        params["toolCallId"] = call_id
    if question.mode == el.FORM:
        params["requestedSchema"] = question.schema or {"type": "object", "properties": {}}
    else:
        params["url"] = question.url
        params["elicitationId"] = question.elicitation_id
    return params


def _fits(value, prop):
    """``value`` is a valid answer for the property schema ``prop``."""
    kind = prop.get("type") if isinstance(prop, dict) else None
    if kind == "string":
        if not isinstance(value, str):
            return False
        allowed = prop.get("enum") or [o.get("const") for o in prop.get("oneOf") or ()
                                       if isinstance(o, dict)]
        return not allowed or value in allowed
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "array":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return False  # a property type we never ask for


def outcome_of(answer, question):
    """The client's result as an :class:`~term2acp.core.elicitation.Elicited`."""
    try:
        loaded = _RESPONSE.load(answer if isinstance(answer, dict) else {})
    except ValidationError:
        return el.Elicited(el.CANCEL, reason=el.MALFORMED)
    action = loaded["action"]
    if action in (el.DECLINE, el.CANCEL):
        return el.Elicited(action)
    if action != el.ACCEPT:
        return el.Elicited(el.CANCEL, reason=el.MALFORMED)
    content = loaded["content"] or {}
    if question.mode == el.FORM:
        schema = question.schema or {}
        props = schema.get("properties") or {}
        missing = [name for name in schema.get("required") or () if name not in content]
        if missing or any(name not in props or not _fits(value, props[name])
                          for name, value in content.items()):
            return el.Elicited(el.DECLINE, reason=el.MALFORMED)
    return el.Elicited(el.ACCEPT, content)


def elicit(client, session_id, support, call_id, question, timeout=None):
    """Ask ``question`` (:class:`~term2acp.core.elicitation.Elicitation`) in the session
    and wait for the answer, at most ``timeout`` seconds (None: until the turn is
    cancelled). Never raises but the waiting greenlet's own kill."""
    if not support.supports(question.mode):
        return el.Elicited(el.DECLINE, reason=el.NOT_SUPPORTED)
    try:
        answer = client.call(methods.ELICITATION_CREATE,
                             request_params(session_id, call_id, question), timeout)
    except gevent.Timeout:
        log.info("question for %s timed out", call_id or session_id)
        return el.Elicited(el.CANCEL, reason=el.TIMED_OUT)
    except DisconnectedError:
        return el.Elicited(el.CANCEL, reason=el.DISCONNECTED)
    except MethodNotFoundError:
        return el.Elicited(el.DECLINE, reason=el.NOT_SUPPORTED)
    except RpcError as exc:
        log.info("question for %s failed: %s", call_id or session_id, exc.message)
        return el.Elicited(el.CANCEL, reason=el.FAILED)
    return outcome_of(answer, question)
