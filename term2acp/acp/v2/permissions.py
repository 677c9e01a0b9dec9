"""The approval gate over ACP: interactions become ``session/request_permission``.

Fail closed, always: only a well-formed ``selected`` outcome naming an offered allow
option approves. Cancelled, malformed, unknown, errors, disconnects, timeouts and a
cancelled turn all deny. The turn greenlet blocks in ``Peer.call``, which withdraws
the outstanding request with ``$/cancel_request`` when the turn is cancelled (the greenlet
is killed) or the optional timeout passes.

There is no separate per-prompt grant cache here: an ``allow_always`` answer becomes a
session grant (``core/access.py``) that the tools' approval checks consult before
asking, which already covers every repeat within the prompt and on later prompts.
"""

import json
import logging
import re

import gevent
from marshmallow import ValidationError

from term2acp.acp import elicitation, methods
from term2acp.acp.schemas.permission import RequestPermissionResponseSchema
from term2acp.acp.v2.translate import parent_meta, tool_content
from term2acp.core import approvals
from term2acp.core.approvals import Decision
from term2acp.rpc.errors import MethodNotFoundError, RpcError

log = logging.getLogger(__name__)

_RESPONSE = RequestPermissionResponseSchema()
DESCRIPTION_CAP = 8192
_SECRETS = (
    (re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"), r"\1<redacted>"),
    (re.compile(r"(?i)\b(sk|pk|rk|ghp|gho|xox[abp])[-_][A-Za-z0-9_-]{8,}"), "<redacted>"),
    (re.compile(r"(?i)((?:api[_-]?key|token|password|passwd|secret|authorization)"
                r"[\"']?\s*[:=]\s*[\"']?)[^\s\"',;]+"), r"\1<redacted>"),
)


def redact(text):
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


def describe(interaction):
    if not interaction.tool_name:  # asked from inside a call: its title and what it shows
        texts = [i.get("text", "") for i in interaction.content or () if i.get("type") == "text"]
        text = "\n\n".join([interaction.title or "", *texts]).strip()
        if interaction.path:
            text += f"\nTarget: {interaction.path}"
        return redact(text)[:DESCRIPTION_CAP]
    try:
        args = json.dumps(interaction.raw_input, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        args = str(interaction.raw_input)
    text = f"{interaction.tool_name or 'tool'} {args}"
    if interaction.path:
        text += f"\nTarget: {interaction.path}"
    return redact(text)[:DESCRIPTION_CAP]


def request_params(session_id, interaction):
    tool_call = {"toolCallId": interaction.call_id, "title": interaction.title,
                 "kind": interaction.kind, "status": "pending"}
    if interaction.raw_input is not None:
        tool_call["rawInput"] = interaction.raw_input
    if interaction.locations:
        tool_call["locations"] = [{"path": loc["path"], **({"line": loc["line"]} if loc.get("line") else {})}
                                  for loc in interaction.locations]
    if interaction.content:
        tool_call["content"] = tool_content(interaction.content)
    params = {
        "sessionId": session_id,
        "title": interaction.title or "Allow this tool call?",
        "description": describe(interaction),
        "subject": {"type": "tool_call", "toolCall": tool_call},
        "options": [{"optionId": cid, "name": label, "kind": kind}
                    for cid, label, kind in interaction.choices],
    }
    if interaction.parent:  # a sub-agent asks: the request names its agent call
        params["_meta"] = tool_call["_meta"] = parent_meta(interaction.parent)
    return params


def decision_for(answer, interaction):
    """Map the client's result to a decision. Anything doubtful is a denial."""
    try:
        loaded = _RESPONSE.load(answer if isinstance(answer, dict) else {})
    except ValidationError:
        return Decision.deny(approvals.CANCELLED)
    outcome = loaded["outcome"]
    if outcome["outcome"] != "selected":
        return Decision.deny(approvals.CANCELLED)
    option_id = outcome.get("option_id")
    offered = {cid: kind for cid, _label, kind in interaction.choices}
    if option_id == "allow-once" and "approve" in offered:
        option_id = "approve"
    kind = offered.get(option_id)
    if kind is None:
        return Decision.deny(approvals.UNKNOWN_OPTION)
    if not kind.startswith("allow"):  # the option is kept: what was answered (recording)
        return Decision(False, option_id, approvals.DENIED_BY_CLIENT)
    return Decision(True, option_id)


class PermissionBridge:
    """The approval gate of one prompt (the same fail-closed rules for v1 and v2)."""

    def __init__(self, client, session_id, timeout=None, params_for=request_params,
                 questions=elicitation.NONE):
        self._client = client
        self._session_id = session_id
        self._timeout = timeout
        self._params_for = params_for  # the connection's version of the request shape
        self._questions = questions  # the client's ElicitationSupport

    def elicits(self, mode):
        """The client takes ``elicitation/create`` questions of ``mode`` (form, url)."""
        return self._questions.supports(mode)

    def elicit(self, call_id, question):
        """Ask ``question`` (core/elicitation.py) through ``elicitation/create``; waits as
        long as a permission request does. Fails closed: see ``acp/elicitation.py``."""
        return elicitation.elicit(self._client, self._session_id, self._questions, call_id,
                                  question, self._timeout)

    def decide(self, interaction):
        try:
            answer = self._client.call(methods.SESSION_REQUEST_PERMISSION,
                                       self._params_for(self._session_id, interaction),
                                       self._timeout)
        except gevent.Timeout:
            log.info("permission request for %s timed out", interaction.call_id)
            return Decision.deny(approvals.TIMED_OUT)
        except MethodNotFoundError:
            return Decision.deny(approvals.NOT_SUPPORTED)
        except RpcError as exc:
            log.info("permission request for %s failed: %s", interaction.call_id, exc.message)
            return Decision.deny(approvals.FAILED)
        return decision_for(answer, interaction)
