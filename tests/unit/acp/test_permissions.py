import pytest

from term2acp.acp.v2.permissions import decision_for, redact, request_params
from term2acp.core import approvals


def interaction(variant=approvals.ORDINARY):
    return approvals.Interaction(id="int_1", variant=variant, call_id="tc_1",
                                 tool_name="t", title="Do it?", kind="other", raw_input={"a": 1},
                                 locations=[{"path": "/w/a", "line": 3}], content=[], path=None)


@pytest.mark.parametrize("answer, allowed, reason", [
    ({"outcome": {"outcome": "selected", "optionId": "approve"}}, True, ""),
    ({"outcome": {"outcome": "selected", "optionId": "allow-once"}}, True, ""),  # alias
    ({"outcome": {"outcome": "selected", "optionId": "reject"}}, False, approvals.DENIED_BY_CLIENT),
    ({"outcome": {"outcome": "selected", "optionId": "allow-folder-session"}}, False, approvals.UNKNOWN_OPTION),
    ({"outcome": {"outcome": "cancelled"}}, False, approvals.CANCELLED),
    ({"outcome": {"outcome": "selected", "optionId": None}}, False, approvals.UNKNOWN_OPTION),
    (None, False, approvals.CANCELLED),
    ([], False, approvals.CANCELLED),
    ({"outcome": {"outcome": 1}}, False, approvals.CANCELLED),
])
def test_permission_answers_map_fail_closed(answer, allowed, reason):
    decision = decision_for(answer, interaction())
    assert decision.allowed is allowed and decision.reason == reason


def test_permission_request_params_shape():
    params = request_params("s", interaction())
    assert params["subject"]["toolCall"] == {"toolCallId": "tc_1", "title": "Do it?", "kind": "other",
                                             "status": "pending", "rawInput": {"a": 1},
                                             "locations": [{"path": "/w/a", "line": 3}]}
    assert [o["optionId"] for o in params["options"]] == ["approve", "reject"]


@pytest.mark.parametrize("text", ["Authorization: Bearer abcdefgh12345678", "api_key=hunter22secret",
                                  '{"password": "p4ssw0rd!"}', "key sk-proj-abcdefghijklmnop"])
def test_permission_description_redacts_secrets(text):
    out = redact(text)
    assert "<redacted>" in out
    for secret in ("abcdefgh12345678", "hunter22secret", "p4ssw0rd!", "sk-proj-abcdefghijklmnop"):
        assert secret not in out
