"""Steering against the fake model server, v1 and v2: initialize says _meta.steering is
supported; a _session/steering prompt, or a session/prompt marked _meta.steering, sent while
the model answers joins that turn (the same turn's next request has it); when idle it starts
a turn; an unmarked prompt during a turn is still refused (v2) or queued (v1)."""

import json

import pytest

from tests.e2e.test_fork_delete import PROTOCOLS, start
from tests.e2e.test_undo import srv, text  # noqa: F401 - srv is a fixture
from tests.support import fake_llm as f


def held_answer():
    return f.openai_sse(f.oa_text("working on it"), f.oa_finish("stop"), hold_after=1)


def prompt_params(sid, words, **meta):
    params = {"sessionId": sid, "prompt": [{"type": "text", "text": words}]}
    if meta:
        params["_meta"] = meta
    return params


def user_texts(request):
    return [m["content"] for m in request.json["messages"] if m["role"] == "user"]


@PROTOCOLS
@pytest.mark.parametrize("how", ["_session/steering", "session/prompt"])
def test_a_steering_prompt_joins_the_running_turn(acp_agent, acp_workspace, srv, protocol, how):
    first = held_answer()
    srv.enqueue(first, text("STEERED-ANSWER"))
    agent = start(acp_agent, srv, protocol)
    assert agent.messages[0]["result"]["_meta"]["steering"] == {"supported": True}
    sid = agent.new_session(acp_workspace)
    prompt_id = agent.prompt_async(sid, "ORIGINAL")
    assert first.reached.wait(10)
    if how == "_session/steering":
        answer = agent.request(how, prompt_params(sid, "ALSO-THIS"))
        assert answer["result"] == {"outcome": "injected"}, answer
        steer_id = None
    else:
        steer_id = agent.request_async(how, prompt_params(sid, "ALSO-THIS", steering=True))
        if protocol == 2:
            assert agent.wait_for(lambda m: m.get("id") == steer_id)["result"] == {}
    first.release()
    if protocol == 1:
        ended = agent.wait_for(lambda m: m.get("id") == prompt_id, timeout=20)
        assert ended["result"]["stopReason"] == "end_turn"
        if steer_id is not None:  # answered as the turn it joined ends
            steered = agent.wait_for(lambda m: m.get("id") == steer_id)
            assert steered["result"]["stopReason"] == "end_turn"
    else:
        agent.wait_update(state="idle", timeout=20)
    assert len(srv.requests) == 2
    assert user_texts(srv.requests[1])[-1].endswith("ALSO-THIS")
    assert any(t.endswith("ORIGINAL") for t in user_texts(srv.requests[1]))
    assert "working on it" in json.dumps(srv.requests[1].json["messages"])
    idles = [m for m in agent.messages if m.get("method") == "session/update"
             and m["params"]["update"].get("state") == "idle"]
    assert len(idles) <= 1  # one turn (v1 has no idle state update)
    agent.close()


@PROTOCOLS
def test_steering_when_idle_starts_a_turn(acp_agent, acp_workspace, srv, protocol):
    srv.enqueue(text("FRESH"))
    agent = start(acp_agent, srv, protocol)
    sid = agent.new_session(acp_workspace)
    answer = agent.request("_session/steering", prompt_params(sid, "NEW-TURN"), timeout=20)
    assert answer["result"] == {"outcome": "startedNewTurn"}, answer
    if protocol == 2:
        agent.wait_update(state="idle")
    assert user_texts(srv.requests[-1])[-1].endswith("NEW-TURN")
    agent.close()


@PROTOCOLS
def test_an_unmarked_prompt_during_a_turn_keeps_todays_behaviour(acp_agent, acp_workspace, srv,
                                                                 protocol):
    first = held_answer()
    srv.enqueue(first, text("SECOND"))
    agent = start(acp_agent, srv, protocol)
    sid = agent.new_session(acp_workspace)
    agent.prompt_async(sid, "ORIGINAL")
    assert first.reached.wait(10)
    other = agent.request_async("session/prompt", prompt_params(sid, "LATER"))
    if protocol == 2:
        refused = agent.wait_for(lambda m: m.get("id") == other)
        assert refused["error"]["code"] == -32000
        first.release()
        agent.wait_update(state="idle", timeout=20)
        assert len(srv.requests) == 1
    else:
        first.release()
        queued = agent.wait_for(lambda m: m.get("id") == other, timeout=20)
        assert queued["result"]["stopReason"] == "end_turn"
        assert len(srv.requests) == 2 and user_texts(srv.requests[1])[-1].endswith("LATER")
        assert not any(t.endswith("LATER") for t in user_texts(srv.requests[0]))
    agent.close()


def test_steering_an_unknown_session_is_an_error(acp_agent, acp_workspace, srv):
    agent = start(acp_agent, srv, 2)
    answer = agent.request("_session/steering", prompt_params("nope", "x"))
    assert answer["error"]["code"] == -32002
    agent.close()
