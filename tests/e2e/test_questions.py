"""ask_user and the elicitation/create plumbing, against the fake model server, v1 and v2:
with elicitation.form advertised the question is an elicitation/create (form mode, the
session and tool call, one string property with an enum of the options) and the answer is
the next request's tool result; without it, a session/request_permission offering the
choices plus one to dismiss; a decline says so; an answer that does not fit the schema is
a decline; session/cancel while the question is open withdraws it and ends the turn
cancelled; no answer before the timeout cancels."""

import pytest

from term2acp.testing.harness import initialize_with, selected
from tests.e2e.test_undo import calls, srv, text  # noqa: F401 - srv is a fixture

FORM = {"elicitation": {"form": {}}}


def asking(acp_agent, server, protocol, elicitation=True, env=None):
    agent = acp_agent(args=("--provider", "openai", "--model", "m"), protocol=protocol,
                      initialize=False,
                      env={"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "sk-t-123456",
                           **(env or {})})
    agent.initialize_params = initialize_with(protocol, FORM if elicitation else {})
    agent.initialize()
    return agent


def tool_results(request):
    return [m["content"] for m in request.json["messages"] if m["role"] == "tool"]


def answering(answer, asked):
    def on_request(message):
        if message["method"] in ("elicitation/create", "session/request_permission"):
            asked.append(message)
            return answer
        return None
    return on_request


QUESTION = ("ask_user", {"question": "Which database?", "options": ["SQLite", "Postgres"]})


@pytest.mark.parametrize("protocol", [2, 1])
def test_ask_user_is_an_elicitation_and_the_answer_is_the_tool_result(acp_agent, acp_workspace,
                                                                       srv, protocol):
    srv.enqueue(calls(QUESTION), text("Postgres it is."))
    agent = asking(acp_agent, srv, protocol)
    sid = agent.new_session(acp_workspace)
    asked = []
    _, updates, end = agent.prompt(sid, "set up the db", on_request=answering(
        {"action": "accept", "content": {"answer": "Postgres"}}, asked))
    assert len(asked) == 1 and asked[0]["method"] == "elicitation/create"
    params = asked[0]["params"]
    call_id = next(u["toolCallId"] for u in updates
                   if u["sessionUpdate"] in ("tool_call", "tool_call_update"))
    assert params["sessionId"] == sid and params["toolCallId"] == call_id
    assert params["mode"] == "form" and params["message"] == "Which database?"
    prop = params["requestedSchema"]["properties"]["answer"]
    assert prop["type"] == "string" and prop["enum"] == ["SQLite", "Postgres"]
    assert tool_results(srv.requests[-1]) == ["The user answered: Postgres"]
    assert (end["result"]["stopReason"] if protocol == 1 else end["params"]["update"]
            ["stopReason"]) == "end_turn"
    agent.close()


@pytest.mark.parametrize("answer, said", [
    ({"action": "decline"}, "The user declined to answer."),
    ({"action": "accept", "content": {"answer": "MongoDB"}}, "The user declined to answer."),
    ({"action": "accept", "content": {"answer": 3}}, "The user declined to answer."),
    ({"action": "accept"}, "The user declined to answer."),  # the answer is required
])
def test_a_decline_or_an_answer_that_does_not_fit_is_a_decline(acp_agent, acp_workspace, srv,
                                                               answer, said):
    srv.enqueue(calls(QUESTION), text("ok"))
    agent = asking(acp_agent, srv, 2)
    sid = agent.new_session(acp_workspace)
    agent.prompt(sid, "set up the db", on_request=answering(answer, []))
    assert tool_results(srv.requests[-1])[0].startswith(said)
    agent.close()


@pytest.mark.parametrize("protocol", [2, 1])
def test_without_elicitation_the_choices_are_a_permission_request(acp_agent, acp_workspace, srv,
                                                                  protocol):
    srv.enqueue(calls(QUESTION), text("Postgres it is."), calls(QUESTION), text("ok"))
    agent = asking(acp_agent, srv, protocol, elicitation=False)
    sid = agent.new_session(acp_workspace)
    asked = []
    agent.prompt(sid, "set up the db", on_request=answering(selected("answer-1"), asked))
    assert [m["method"] for m in asked] == ["session/request_permission"]
    options = [(o["optionId"], o["name"], o["kind"]) for o in asked[0]["params"]["options"]]
    assert options == [("answer-0", "SQLite", "allow_once"), ("answer-1", "Postgres", "allow_once"),
                       ("question-dismiss", "Dismiss", "reject_once")]
    assert "Which database?" in str(asked[0]["params"])
    assert tool_results(srv.requests[-1]) == ["The user answered: Postgres"]
    agent.prompt(sid, "again", on_request=answering(selected("question-dismiss"), []))
    assert tool_results(srv.requests[-1])[-1].startswith("The user dismissed the question.")
    agent.close()


@pytest.mark.parametrize("elicitation", [True, False])
def test_session_cancel_while_the_question_is_open_ends_the_turn_cancelled(
        acp_agent, acp_workspace, srv, elicitation):
    srv.enqueue(calls(QUESTION), text("never"))
    agent = asking(acp_agent, srv, 2, elicitation=elicitation)
    sid = agent.new_session(acp_workspace)
    agent.prompt_async(sid, "set up the db")
    method = "elicitation/create" if elicitation else "session/request_permission"
    agent.wait_update(state="requires_action")
    request = agent.wait_for(lambda m: m.get("method") == method)
    agent.notify("session/cancel", {"sessionId": sid})
    withdraw = agent.wait_for(lambda m: m.get("method") == "$/cancel_request")
    assert withdraw["params"] == {"requestId": request["id"]}
    assert agent.wait_update(state="idle")["stopReason"] == "cancelled"
    agent.send({"jsonrpc": "2.0", "id": request["id"],  # too late: nothing happens
                "result": {"action": "accept", "content": {"answer": "SQLite"}}})
    assert len(srv.requests) == 1
    assert agent.request("session/list", {})["result"]["sessions"]
    agent.close()


def test_the_user_cancelling_the_question_ends_the_turn_cancelled(acp_agent, acp_workspace, srv):
    srv.enqueue(calls(QUESTION), text("never"))
    agent = asking(acp_agent, srv, 2)
    sid = agent.new_session(acp_workspace)
    _, _, end = agent.prompt(sid, "db?", on_request=answering({"action": "cancel"}, []))
    assert end["params"]["update"]["stopReason"] == "cancelled"
    assert len(srv.requests) == 1


def test_no_answer_before_the_timeout_cancels(acp_agent, acp_workspace, srv):
    srv.enqueue(calls(QUESTION), text("never"))
    agent = asking(acp_agent, srv, 2, env={"TERM2ACP_APPROVAL_TIMEOUT": "0.3"})
    sid = agent.new_session(acp_workspace)
    agent.prompt_async(sid, "db?")
    request = agent.wait_for(lambda m: m.get("method") == "elicitation/create")
    withdraw = agent.wait_for(lambda m: m.get("method") == "$/cancel_request")
    assert withdraw["params"] == {"requestId": request["id"]}
    assert agent.wait_update(state="idle")["stopReason"] == "cancelled"
