"""What third-party clients send, as they send it (acpx, Toad, CodeCompanion, agent-shell),
through the launcher on v1 (and v2 where it applies)."""

import pytest

from tests.support import fake_llm as f

PROTOCOLS = pytest.mark.parametrize("protocol", [1, 2])

# CodeCompanion puts a rules file it shares in a text block before what the user typed
RULES_BLOCK = {"type": "text", "text": "Sharing `AGENTS.md`:\n---\nBe brief.\n---"}


def prompt_blocks(agent, sid, blocks, timeout=20):
    """Send ``blocks`` as one prompt; ``(updates, stop reason)`` once the turn has ended."""
    start = len(agent.messages)
    request_id = agent.request_async("session/prompt", {"sessionId": sid, "prompt": blocks})
    if agent.protocol == 1:
        end = agent.wait_for(lambda m: m.get("id") == request_id and "method" not in m, timeout)
        reason = end["result"]["stopReason"]
    else:
        end = agent.wait_update(state="idle", session_id=sid, timeout=timeout)
        reason = end["stopReason"]
    updates = [m["params"]["update"] for m in agent.messages[start:]
               if m.get("method") == "session/update" and m["params"]["sessionId"] == sid]
    return updates, reason


def texts(updates, kind="agent_message_chunk"):
    return "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == kind)


@pytest.fixture
def model():
    server = f.FakeLLMServer()
    server.responder = lambda request: f.openai_sse(f.oa_text("fixed"), f.oa_finish("stop"))
    server.start()
    yield server
    server.stop()


def openai_agent(acp_agent, model, protocol):
    return acp_agent(args=("--provider", "openai", "--model", "m"), protocol=protocol,
                     env={"OPENAI_BASE_URL": model.openai_url, "OPENAI_API_KEY": "sk-test-1234567"})


@PROTOCOLS
def test_a_command_after_shared_context_runs_as_a_command(acp_agent, acp_workspace, model,
                                                          protocol):
    agent = openai_agent(acp_agent, model, protocol)
    sid = agent.new_session(acp_workspace)
    updates, reason = prompt_blocks(agent, sid, [RULES_BLOCK,
                                                 {"type": "text", "text": "/mode ask"}])
    assert reason == "end_turn"
    assert texts(updates) == "Mode set to ask."
    assert not model.requests  # the command never reached the model
    # ordinary words after the context still go to the model, context included
    updates, _ = prompt_blocks(agent, sid, [RULES_BLOCK, {"type": "text", "text": "fix it"}])
    assert texts(updates) == "fixed"
    sent = model.requests[-1].json["messages"][-1]["content"]
    assert "Be brief." in sent and sent.endswith("fix it")


@PROTOCOLS
def test_the_title_is_the_users_words_and_the_rules_notice_is_a_thought(
        acp_agent, acp_workspace, model, protocol):
    with open(f"{acp_workspace}/AGENTS.md", "w") as rules:
        rules.write("Be brief.\n")
    agent = openai_agent(acp_agent, model, protocol)
    sid = agent.new_session(acp_workspace)
    updates, _ = prompt_blocks(agent, sid, [RULES_BLOCK,
                                            {"type": "text", "text": "Fix the flaky test"}])
    titles = [u["title"] for u in updates
              if u["sessionUpdate"] == "session_info_update" and u.get("title")]
    assert titles == ["Fix the flaky test"]
    listed = agent.request("session/list", {})["result"]["sessions"]
    assert [s["title"] for s in listed] == ["Fix the flaky test"]
    # the answer is the model's text alone; the notice is a thought
    assert texts(updates) == "fixed"
    assert "Using project instructions" in texts(updates, "agent_thought_chunk")
