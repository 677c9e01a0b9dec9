"""Prompt turns over the real launcher with the scripted provider."""

import pytest



def error_of(message):
    assert "error" in message, message
    return message["error"]


def kinds(updates):
    return [u["sessionUpdate"] if u["sessionUpdate"] != "state_update" else u["state"]
            for u in updates]


def test_prompt_lifecycle_order(started):
    agent, sid = started([[{"thought": "hmm"}, {"text": "Hel"}, {"text": "lo"},
                           {"usage": {"input": 100, "output": 7, "cost": 0.002}}]],
                         context_window=32000)
    start = len(agent.messages)
    response, updates, idle = agent.prompt(sid, "hi")
    seen = agent.messages[start:]
    assert seen[0]["params"]["update"] == {"sessionUpdate": "state_update", "state": "running"}
    assert seen[1] is response and response["result"] == {}
    assert seen[2]["params"]["update"]["sessionUpdate"] == "user_message"
    assert seen[2]["params"]["update"]["content"] == [{"type": "text", "text": "hi"}]
    assert kinds(updates) == ["running", "user_message", "session_info_update",
                              "agent_thought_chunk", "agent_message_chunk", "agent_message_chunk",
                              "usage_update", "session_info_update", "idle"]
    chunks = [u for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
    assert len({c["messageId"] for c in chunks}) == 1
    usage = next(u for u in updates if u["sessionUpdate"] == "usage_update")
    assert usage == {"sessionUpdate": "usage_update", "used": 107, "size": 32000,
                     "cost": {"amount": 0.002, "currency": "USD"}}
    assert idle["params"]["update"] == {"sessionUpdate": "state_update", "state": "idle",
                                        "stopReason": "end_turn",
                                        "usage": {"totalTokens": 107, "inputTokens": 100,
                                                  "outputTokens": 7}}
    assert agent.close() == 0


@pytest.mark.parametrize("step, reason", [
    ({"stop": "max_tokens"}, "max_tokens"),
    ({"stop": "refusal"}, "refusal"),
    ({"stop": "end_turn"}, "end_turn"),
])
def test_prompt_stop_reasons_from_the_model(started, step, reason):
    agent, sid = started([[{"text": "x"}, step]])
    _, _, idle = agent.prompt(sid, "go")
    assert idle["params"]["update"]["stopReason"] == reason
    agent.close()


def test_prompt_max_turn_requests(started):
    loop = [{"tool_call": {"name": "no_such_tool", "arguments": {}}}]
    agent, sid = started([loop] * 5, env={"TERM2ACP_MAX_TURN_REQUESTS": "3"})
    _, updates, idle = agent.prompt(sid, "go")
    assert idle["params"]["update"]["stopReason"] == "max_turn_requests"
    failed = [u for u in updates if u["sessionUpdate"] == "tool_call_update" and u.get("status") == "failed"]
    assert len(failed) == 3
    agent.close()


def test_prompt_provider_error_is_term2_error_with_a_summary(started):
    agent, sid = started([[{"text": "partial"}, {"error": "upstream exploded"}]])
    _, _, idle = agent.prompt(sid, "go")
    update = idle["params"]["update"]
    assert update["stopReason"] == "_term2_error"
    assert update["_meta"]["term2"]["error"] == "upstream exploded"
    agent.wait_stderr("upstream exploded")  # stderr is pumped by a thread: bounded wait
    # the session is usable again (the script has no second turn: another clean error)
    _, _, idle = agent.prompt(sid, "again")
    assert "has no turn 2" in idle["params"]["update"]["_meta"]["term2"]["error"]
    agent.close()


def test_prompt_admission_one_at_a_time_per_session(started, workspace):
    agent, sid = started([[{"hang": True}], [{"text": "other"}]])
    agent.prompt_async(sid, "a")
    busy = agent.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "b"}]})
    assert error_of(busy)["code"] == -32000
    other = agent.new_session(workspace)
    # another session is independent (it plays turn 1 of its own conversation: hang too)
    agent.prompt_async(other, "c")
    agent.wait_update("user_message", session_id=other)
    agent.notify("session/cancel", {"sessionId": sid})
    agent.notify("session/cancel", {"sessionId": other})
    settled = set()  # the two idles may come in either order

    def both_idle(m):
        update = m.get("params", {}).get("update", {}) if m.get("method") == "session/update" else {}
        if update.get("state") == "idle" and update.get("stopReason") == "cancelled":
            settled.add(m["params"]["sessionId"])
        return settled == {sid, other}
    agent.wait_for(both_idle)
    agent.close()


@pytest.mark.parametrize("prompt, message", [
    ([{"type": "image", "data": "AAAA", "mimeType": "image/png"}], "does not accept images"),
    ([{"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}], "Unsupported prompt content block: audio"),
    ([{"type": "resource", "resource": {"uri": "file:///x", "blob": "AAAA"}}], "is binary (blob)"),
    ([{"type": "text", "text": "   "}], "prompt must contain text"),
    ([], "prompt must contain text"),
    ([{"type": "text"}], "Invalid params"),
    ([{"type": "future_thing"}], "Unsupported prompt content block: future_thing"),
])
def test_prompt_refusals_send_no_state_updates(started, prompt, message):
    agent, sid = started([[{"text": "never"}]])
    start = len(agent.messages)  # after the session's slash commands
    error = error_of(agent.request("session/prompt", {"sessionId": sid, "prompt": prompt}))
    assert error["code"] == -32602 and message in error["message"]
    assert not [m for m in agent.messages[start:] if m.get("method") == "session/update"]
    agent.close()


def test_prompt_unknown_session(agent):
    error = error_of(agent.request("session/prompt", {"sessionId": "nope",
                                                      "prompt": [{"type": "text", "text": "x"}]}))
    assert error["code"] == -32002
    agent.close()


def test_prompt_resource_link_and_embedded_text_are_context(started):
    agent, sid = started([[{"text": "ok"}]])
    agent.request_async("session/prompt", {"sessionId": sid, "prompt": [
        {"type": "text", "text": "look"},
        {"type": "resource_link", "name": "a.py", "uri": "file:///w/a.py"},
        {"type": "resource", "resource": {"uri": "file:///w/b.py", "text": "print(1)"}},
        {"type": "_vendor_hint", "x": 1},
    ]})
    idle = agent.wait_update(state="idle")
    assert idle["stopReason"] == "end_turn"
    agent.close()


def test_prompt_without_any_provider_says_what_to_set(spawn, workspace):
    agent = spawn(env={"TERM2ACP_LOCAL_MODEL": "off"})
    agent.initialize()
    sid = agent.new_session(workspace)
    start = len(agent.messages)  # after the session's slash commands
    error = error_of(agent.request("session/prompt", {"sessionId": sid,
                                                      "prompt": [{"type": "text", "text": "x"}]}))
    assert error["code"] == -32000
    assert "OPENAI_API_KEY" in error["message"] and "ANTHROPIC_API_KEY" in error["message"]
    assert not [m for m in agent.messages[start:] if m.get("method") == "session/update"]
    agent.close()


def test_cancel_while_streaming_then_the_session_is_ready_again(started):
    agent, sid = started([[{"text": "partial"}, {"hang": True}], [{"text": "fresh"}]])
    agent.prompt_async(sid, "a")
    agent.wait_update("agent_message_chunk")
    agent.notify("session/cancel", {"sessionId": sid})
    idle = agent.wait_update(state="idle")
    assert idle["stopReason"] == "cancelled"
    _, updates, idle = agent.prompt(sid, "b")
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    assert [u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"] == ["fresh"]
    agent.close()


def prompt_and_cancel(session_id, request_id):
    return [{"jsonrpc": "2.0", "id": request_id, "method": "session/prompt", "params": {
                "sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]}},
            {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}}]


def test_a_cancel_in_the_same_write_as_its_prompt_cancels_that_prompt(started):
    # Issue 16: the cancel was read (and run inline) before the prompt's greenlet admitted
    # the prompt, found no turn, and the admission then forgot it: the turn ran to its end.
    # The first round is the first prompt of the process (the provider is created then).
    agent, sid = started([[{"text": "fresh"}]])
    for round_id in range(1, 6):
        agent.send_lines(prompt_and_cancel(sid, round_id))
        response = agent.wait_for(lambda m, i=round_id: m.get("id") == i, timeout=10)
        assert response["result"] == {}
        idle = agent.wait_update(state="idle", session_id=sid, timeout=10)
        assert idle["stopReason"] == "cancelled", f"round {round_id}: {idle}"
    # no model request was made: the next prompt plays the script's first turn
    _, updates, idle = agent.prompt(sid, "b")
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    assert [u["content"]["text"] for u in updates
            if u["sessionUpdate"] == "agent_message_chunk"] == ["fresh"]
    agent.close()


def test_cancel_of_an_idle_or_unknown_session_is_harmless(started):
    agent, sid = started([[{"text": "ok"}]])
    agent.notify("session/cancel", {"sessionId": sid})
    agent.notify("session/cancel", {"sessionId": "unknown"})
    _, _, idle = agent.prompt(sid, "go")
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    agent.close()


def test_malformed_and_unknown_tool_calls_fail_cleanly(started):
    agent, sid = started([[{"tool_call": {"name": "read_file", "arguments": "{not json"}},
                           {"tool_call": {"name": "teleport", "arguments": {}}}],
                          [{"text": "sorry"}]])
    _, updates, idle = agent.prompt(sid, "go")
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    failed = [u for u in updates if u["sessionUpdate"] == "tool_call_update" and u.get("status") == "failed"]
    texts = [f["content"][0]["content"]["text"] for f in failed]
    assert "not valid JSON" in texts[0] and "Unknown tool 'teleport'" in texts[1]
    agent.close()


def test_eof_during_a_turn_cancels_it_and_exits_0(started):
    agent, sid = started([[{"hang": True}]])
    agent.prompt_async(sid, "a")
    agent.wait_update("user_message")
    agent.close_stdin()
    assert agent.wait(5) == 0
    idle = agent.wait_update(state="idle", timeout=5)
    assert idle["stopReason"] == "cancelled"
