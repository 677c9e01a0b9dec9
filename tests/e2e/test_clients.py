"""What third-party clients send, as they send it (acpx, Toad, CodeCompanion, agent-shell),
through the launcher on v1 (and v2 where it applies)."""

import os

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


# ---------------------------------------------------------------- Toad: prompts typed meanwhile
def answer_of(agent, request_id, timeout=20):
    """The answer to ``request_id``, read now or earlier (answers may come in any order)."""
    def answers(m):
        return isinstance(m, dict) and m.get("id") == request_id and "method" not in m

    seen = next((m for m in agent.messages if answers(m)), None)
    return seen if seen is not None else agent.wait_for(answers, timeout)


def text_prompt(agent, sid, text):
    return agent.request_async("session/prompt", {"sessionId": sid,
                                                  "prompt": [{"type": "text", "text": text}]})


def test_v1_a_prompt_sent_while_a_turn_runs_is_held_and_runs_after_it(acp_agent, acp_workspace):
    server = f.FakeLLMServer().start()
    first = f.openai_sse(f.oa_text("one"), f.oa_finish("stop"), hold_after=1)
    server.enqueue(first, f.openai_sse(f.oa_text("two"), f.oa_finish("stop")))
    try:
        agent = openai_agent(acp_agent, server, 1)
        sid = agent.new_session(acp_workspace)
        a = text_prompt(agent, sid, "first")
        assert first.reached.wait(10)  # the first turn is streaming
        b = text_prompt(agent, sid, "second")  # Toad sends it at once
        # a request read after it is answered after the prompt's handler has run (and held)
        assert "result" in agent.request("session/list", {})
        first.release()
        answers = [answer_of(agent, a), answer_of(agent, b)]
        assert [r["result"]["stopReason"] for r in answers] == ["end_turn", "end_turn"]
        assert agent.messages.index(answers[0]) < agent.messages.index(answers[1])
        sent = server.requests[-1].json["messages"]
        # the held prompt ran after the first turn, with its answer in the history
        assert [m["content"] for m in sent if m["role"] in ("user", "assistant")][-3:] == \
            ["first", "one", "second"]
    finally:
        server.stop()


def test_v1_cancel_ends_the_running_turn_and_every_held_prompt(acp_agent, acp_workspace):
    server = f.FakeLLMServer().start()
    first = f.openai_sse(f.oa_text("one"), f.oa_finish("stop"), hold_after=1)
    server.enqueue(first)
    server.responder = lambda request: f.openai_sse(f.oa_text("later"), f.oa_finish("stop"))
    try:
        agent = openai_agent(acp_agent, server, 1)
        sid = agent.new_session(acp_workspace)
        running = text_prompt(agent, sid, "first")
        assert first.reached.wait(10)
        held = [text_prompt(agent, sid, f"held {n}") for n in range(8)]
        refused = answer_of(agent, text_prompt(agent, sid, "one too many"))
        assert refused["error"]["code"] == -32000  # the bound: 8 held
        agent.notify("session/cancel", {"sessionId": sid})
        reasons = [answer_of(agent, r)["result"]["stopReason"] for r in [running] + held]
        assert reasons == ["cancelled"] * 9
        assert len(server.requests) == 1  # no held prompt reached the model
        # the session goes on: the next prompt runs
        updates, reason = prompt_blocks(agent, sid, [{"type": "text", "text": "again"}])
        assert reason == "end_turn" and texts(updates) == "later"
    finally:
        server.stop()


def test_v2_keeps_refusing_a_second_foreground_prompt(acp_agent, acp_workspace):
    server = f.FakeLLMServer().start()
    first = f.openai_sse(f.oa_text("one"), f.oa_finish("stop"), hold_after=1)
    server.enqueue(first)
    try:
        agent = openai_agent(acp_agent, server, 2)
        sid = agent.new_session(acp_workspace)
        text_prompt(agent, sid, "first")
        assert first.reached.wait(10)
        second = answer_of(agent, text_prompt(agent, sid, "second"))
        assert second["error"]["code"] == -32000
        first.release()
        agent.wait_update(state="idle", session_id=sid)
    finally:
        server.stop()


# ---------------------------------------------------------------- CodeCompanion: options by kind
def codecompanion_pick(kind):
    """CodeCompanion's diff view maps each option kind to an option id, the last option of
    a kind winning, and answers the key the user pressed with that id."""
    def answer(message):
        if message.get("method") != "session/request_permission":
            return None
        by_kind = {}
        for option in message["params"]["options"]:
            by_kind[option["kind"]] = option["optionId"]
        return {"outcome": {"outcome": "selected", "optionId": by_kind[kind]}}
    return answer


def test_v1_allow_always_by_kind_reaches_the_file_grant(acp_agent, acp_workspace, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    target = str(outside / "made.txt")
    call = {"tool_call": {"name": "create_file", "arguments": {"path": target, "content": "a\n"}}}
    sibling = {"tool_call": {"name": "create_file",
                             "arguments": {"path": target + ".2", "content": "b\n"}}}
    agent = acp_agent(turns=[[call], [{"text": "made"}], [sibling], [{"text": "tried"}]],
                      protocol=1)
    sid = agent.new_session(acp_workspace)
    agent.prompt(sid, "make it", on_request=codecompanion_pick("allow_always"))
    assert open(target).read() == "a\n"
    # the grant covers that file only: a sibling asks again (and is rejected here)
    asked = []

    def reject(message):
        if message.get("method") == "session/request_permission":
            asked.append(message)
            return {"outcome": {"outcome": "selected", "optionId": "reject"}}
        return None

    agent.prompt(sid, "and a sibling", on_request=reject)
    assert len(asked) == 1 and not (outside / "made.txt.2").exists()


# ---------------------------------------------------------------- acpx: a refused write
def test_v1_the_editors_reason_for_refusing_a_write_reaches_the_tool_result(acp_agent,
                                                                            acp_workspace):
    from term2acp.testing.harness import ANSWERED

    call = {"tool_call": {"name": "create_file", "arguments": {"path": "a.txt", "content": "a"}}}
    agent = acp_agent(turns=[[call], [{"text": "could not"}]], protocol=1)
    sid = agent.new_session(acp_workspace)

    def refuse(message):  # acpx's answer when its permission mode denies writes
        if message.get("method") != "fs/write_text_file":
            return None
        agent.send({"jsonrpc": "2.0", "id": message["id"], "error": {
            "code": -32603, "message": "Internal error",
            "data": {"details": "Permission denied for fs/write_text_file"}}})
        return ANSWERED

    _, updates, _ = agent.prompt(sid, "write it", on_request=refuse)
    failed = [u for u in updates if u.get("status") == "failed"]
    assert len(failed) == 1
    shown = failed[0]["content"][0]["content"]["text"]
    assert "Permission denied for fs/write_text_file" in shown and "Internal error" in shown
    assert not os.path.exists(os.path.join(acp_workspace, "a.txt"))


# ---------------------------------------------------------------- CodeCompanion: /resume elsewhere
@pytest.mark.acp_process
def test_v1_load_in_another_process_takes_the_session_over(acp_agent, acp_workspace, tmp_path):
    """One agent process per chat: the second chat's session/load of a session the first
    still holds takes it over, and a turn running there ends cancelled."""
    home = {"TERM2ACP_HOME": str(tmp_path / "shared-home")}
    first = acp_agent(turns=[[{"text": "noted"}], [{"text": "working"}, {"hang": True}]],
                      protocol=1, env=home)
    sid = first.new_session(acp_workspace)
    _, _, end = first.prompt(sid, "remember 42")
    assert end["result"]["stopReason"] == "end_turn"
    running = text_prompt(first, sid, "now work")
    first.wait_update("agent_message_chunk", session_id=sid)  # the turn streams, then hangs

    second = acp_agent(turns=[], protocol=1, env=home)
    start = len(second.messages)
    answer = second.request("session/load", {"sessionId": sid, "cwd": acp_workspace,
                                             "mcpServers": []})
    assert "result" in answer, answer
    replayed = [m["params"]["update"] for m in second.messages[start:]
                if m.get("method") == "session/update"]
    said = texts(replayed) + texts(replayed, "user_message_chunk")
    assert "remember 42" in said and "noted" in said
    assert "another term2-acp process" not in said  # the first's notice is not journaled
    assert answer_of(first, running)["result"]["stopReason"] == "cancelled"
    told = [m["params"]["update"]["content"]["text"] for m in first.messages
            if m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"]
    assert any(f"pid {second.proc.pid}" in text for text in told)
