"""acp/elicitation.py: the client's modes, the request's shape, and every doubtful answer
failing closed (a cancel or a decline, never an accept)."""

import gevent
import pytest

from term2acp.acp.elicitation import ElicitationSupport, elicit, outcome_of, request_params
from term2acp.core import elicitation as el
from term2acp.rpc.errors import DisconnectedError, MethodNotFoundError, RpcError
from term2acp.testing.schema import errors_for


@pytest.mark.parametrize("caps, form, url", [
    ({"elicitation": {"form": {}, "url": {}}}, True, True),
    ({"elicitation": {"form": {}}}, True, False),
    ({"elicitation": {"form": None, "url": {}}}, False, True),
    ({"elicitation": {"form": True}}, False, False),  # markers are objects
    ({"elicitation": {}}, False, False),
    ({"elicitation": None}, False, False),
    ({}, False, False),
    (None, False, False),
])
def test_the_modes_the_client_advertised(caps, form, url):
    support = ElicitationSupport(caps)
    assert (support.supports(el.FORM), support.supports(el.URL)) == (form, url)


@pytest.mark.parametrize("version", [1, 2])
def test_requests_validate_against_both_schemas(version):
    form = request_params("s1", "tc_1", el.string_question("Which?", ["a", "b"]))
    url = request_params("s1", None, el.Elicitation(el.URL, "Sign in", url="https://x.example/a",
                                                    elicitation_id="e1"))
    assert not errors_for("CreateElicitationRequest", form, version)
    assert not errors_for("CreateElicitationRequest", url, version)
    assert "toolCallId" not in url


QUESTION = el.string_question("Which?", ["a", "b"])


@pytest.mark.parametrize("answer, action", [
    ({"action": "accept", "content": {"answer": "a"}}, el.ACCEPT),
    ({"action": "decline"}, el.DECLINE),
    ({"action": "cancel"}, el.CANCEL),
    ({"action": "accept", "content": {"answer": "c"}}, el.DECLINE),  # not an option
    ({"action": "accept", "content": {"answer": "a", "more": 1}}, el.DECLINE),
    ({"action": "accept", "content": {}}, el.DECLINE),  # the required answer is missing
    ({"action": "accept", "content": {"answer": True}}, el.DECLINE),
    ({"action": "_custom"}, el.CANCEL),
    ({"action": 1}, el.CANCEL),
    ({}, el.CANCEL),
    ("accept", el.CANCEL),
    (None, el.CANCEL),
])
def test_only_a_fitting_accept_is_an_accept(answer, action):
    assert outcome_of(answer, QUESTION).action == action


class Peer:
    """The editor's side of one request: raises or answers as told."""

    def __init__(self, outcome):
        self.outcome = outcome
        self.sent = []

    def call(self, method, params, timeout=None):
        self.sent.append((method, params, timeout))
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome


@pytest.mark.parametrize("raised, action, reason", [
    (DisconnectedError(), el.CANCEL, el.DISCONNECTED),
    (gevent.Timeout(), el.CANCEL, el.TIMED_OUT),
    (RpcError("boom"), el.CANCEL, el.FAILED),
    (MethodNotFoundError(), el.DECLINE, el.NOT_SUPPORTED),
])
def test_no_answer_fails_closed(raised, action, reason):
    peer = Peer(raised)
    got = elicit(peer, "s1", ElicitationSupport({"elicitation": {"form": {}}}), "tc_1", QUESTION, 5)
    assert (got.action, got.reason) == (action, reason)
    assert peer.sent[0][0] == "elicitation/create" and peer.sent[0][2] == 5


def test_a_mode_the_client_did_not_advertise_is_never_sent():
    peer = Peer({"action": "accept", "content": {"answer": "a"}})
    got = elicit(peer, "s1", ElicitationSupport({"elicitation": {"url": {}}}), None, QUESTION)
    assert got.action == el.DECLINE and not peer.sent
