"""Real provider code paths through the launcher, against fake servers on 127.0.0.1."""

import time

import pytest

from term2acp.testing.harness import AgentProcess
from tests.support import fake_llm as f
from tests.support.clock import within


def test_openai_compatible_server_full_turn_with_a_tool_call(spawn, workspace, server):
    with open(f"{workspace}/hello.txt", "w") as fh:
        fh.write("hello from disk\n")
    server.enqueue(
        f.openai_sse(f.oa_text("Reading it."), f.oa_tool(0, "call_1", "read_file", '{"path": "hel'),
                     f.oa_tool(0, args='lo.txt"}'), f.oa_finish("tool_calls"), f.oa_usage(120, 9)),
        f.openai_sse(f.oa_text("It says hello."), f.oa_finish("stop"), f.oa_usage(180, 5)))
    agent = spawn("--provider", "openai", "--model", "my-local-model",
                  env={"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "sk-test-key-123456"})
    agent.initialize()
    sid = agent.new_session(workspace)
    _, updates, idle = agent.prompt(sid, "what does hello.txt say?", timeout=30)
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    text = "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk")
    assert text == "Reading it.It says hello."
    done = [u for u in updates if u["sessionUpdate"] == "tool_call_update" and u.get("status") == "completed"]
    assert "hello from disk" in done[0]["content"][0]["content"]["text"]
    first, second = [r.json for r in server.wait_requests(2)]
    assert first["model"] == "my-local-model" and first["stream"] is True
    assert {t["function"]["name"] for t in first["tools"]} >= {"read_file", "edit_file", "shell"}
    tool_message = [m for m in second["messages"] if m["role"] == "tool"][0]
    assert tool_message["tool_call_id"] == "call_1" and "hello from disk" in tool_message["content"]
    assert agent.close() == 0


@pytest.mark.acp_process  # the secret is looked for in a process's whole stderr
def test_openai_auth_failure_ends_the_turn_with_a_clear_error_and_no_secret(spawn, workspace, server):
    server.enqueue(f.Status(401, {"error": {"message": "Incorrect API key provided"}}))
    agent = spawn("--provider", "openai", "--model", "gpt-4.1-mini",
                  env={"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "sk-secret-abcdef123456"})
    agent.initialize()
    sid = agent.new_session(workspace)
    _, _, idle = agent.prompt(sid, "hi", timeout=30)
    update = idle["params"]["update"]
    assert update["stopReason"] == "_term2_error"
    assert "authentication failed" in update["_meta"]["term2"]["error"]
    agent.close()
    everything = "".join(line.decode() for line in agent.lines) + agent.stderr
    assert "sk-secret-abcdef123456" not in everything
    assert "authentication failed" in agent.stderr


def test_anthropic_streaming_with_thinking(spawn, workspace, server):
    server.enqueue(f.anthropic_sse(f.an_start(), f.an_thinking(0, "Hmm."), f.an_text(1, "Hi", " there"),
                                   f.an_end("end_turn")))
    agent = spawn("--provider", "anthropic", "--model", "claude-sonnet-4-5", "--effort", "low",
                  env={"ANTHROPIC_BASE_URL": server.root_url, "ANTHROPIC_API_KEY": "sk-ant-test"})
    agent.initialize()
    sid = agent.new_session(workspace)
    _, updates, idle = agent.prompt(sid, "hello", timeout=30)
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    kinds = [u["sessionUpdate"] for u in updates]
    assert "agent_thought_chunk" in kinds and "agent_message_chunk" in kinds
    body = server.wait_requests(1)[0].json
    assert body["thinking"]["type"] == "enabled"
    agent.close()


def test_cancel_mid_stream_drops_the_connection(spawn, workspace, server):
    stream = f.openai_sse(f.oa_text("partial"), hold_after=1)
    server.enqueue(stream)
    agent = spawn("--provider", "openai", "--model", "gpt-4.1-mini",
                  env={"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "x"})
    agent.initialize()
    sid = agent.new_session(workspace)
    agent.prompt_async(sid, "go")
    agent.wait_update("agent_message_chunk", timeout=30)
    agent.notify("session/cancel", {"sessionId": sid})
    idle = agent.wait_update(state="idle", timeout=10)
    assert idle["stopReason"] == "cancelled"
    assert stream.disconnected.wait(5)
    agent.close()


@pytest.mark.parametrize("model, sent", [("gpt-4.1-mini", None), ("o4-mini", "low"),
                                         ("served-model", "low")])
def test_effort_is_sent_only_to_models_that_take_it(spawn, workspace, server, model, sent):
    server.enqueue(f.openai_sse(f.oa_text("ok"), f.oa_finish("stop")))
    agent = spawn("--provider", "openai", "--model", model, "--effort", "low",
                  env={"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "x"})
    agent.initialize()
    sid = agent.new_session(workspace)
    agent.prompt(sid, "hi", timeout=30)
    assert server.wait_requests(1)[0].json.get("reasoning_effort") == sent
    agent.close()


def test_a_server_streaming_without_pause_does_not_starve_the_agent(agent_env, workspace):
    """Issue 10 item 3: 200,000 chunks written in one burst by a loopback server (on a
    native thread, so it refills the socket however busy this process is). Updates must
    reach the client while the burst is still being written, a cheap request must be
    answered meanwhile, and cancel must end the turn (the stream never ends by itself)."""
    burst = f.NativeBurstServer(f.Burst(None, f.oa_text("x"), 200_000)).start()
    env = dict(agent_env, OPENAI_BASE_URL=burst.openai_url, OPENAI_API_KEY="x")
    # a process: the server's thread refills the socket whatever the agent's process does
    agent = AgentProcess(["--provider", "openai", "--model", "gpt-4.1-mini"], env=env,
                         validate=False, process=True).start()  # 200,000 schema checks would slow the reader
    try:
        agent.initialize()
        sid = agent.new_session(workspace)
        agent.prompt_async(sid, "go")
        agent.wait_update("agent_message_chunk", timeout=30)
        assert not burst.written, "no update reached the client before the burst ended"
        listed = agent.request("session/list", {}, timeout=10)
        assert "result" in listed
        agent.notify("session/cancel", {"sessionId": sid})
        idle = agent.wait_update(state="idle", timeout=30)
        assert idle["stopReason"] == "cancelled"
        assert burst.wait_disconnected(10), "the agent kept the connection open after cancel"
        assert agent.close() == 0
    finally:
        agent.kill()
        burst.stop()


def test_a_silent_provider_shows_a_thought_before_its_first_words(spawn, workspace, server,
                                                                  tmp_path):
    """With the default settings, a provider that holds its answer gets a thought on
    screen after FIRST_WORD (2) seconds, long before the 15 s waiting notice."""
    (tmp_path / "config.toml").write_text('[providers.openai]\napi = "chat"\n')  # no probe
    stream = f.openai_sse(f.oa_text("late answer"), f.oa_finish("stop"), hold_after=0)
    server.enqueue(stream)
    agent = spawn("--provider", "openai", "--model", "gpt-4.1-mini",
                  env={"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "x"})
    agent.initialize()
    sid = agent.new_session(workspace)
    agent.prompt_async(sid, "go")
    thought = agent.wait_update("agent_thought_chunk", timeout=30)
    assert thought["content"]["text"].startswith("Waiting for the model's first words")
    assert stream.reached.is_set() and not stream.released.is_set()  # still silent
    stream.release()
    agent.wait_update(state="idle", timeout=30)
    agent.close()


def test_a_silent_model_gets_one_waiting_thought_and_cancel_still_ends_at_once(
        spawn, workspace, server, tmp_path):
    """The server accepts the request and holds its answer: past ``wait_notice`` the editor
    gets one thought saying the agent still waits (not answer text), and a cancel ends the
    turn at once instead of after the 600 s read timeout."""
    (tmp_path / "config.toml").write_text("wait_notice = 0.2\n")
    stream = f.openai_sse(f.oa_text("too late"), hold_after=0)
    server.enqueue(stream)
    agent = spawn("--provider", "openai", "--model", "gpt-4.1-mini",
                  env={"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "x"})
    agent.initialize()
    sid = agent.new_session(workspace)
    agent.prompt_async(sid, "go")
    thought = agent.wait_update("agent_thought_chunk", timeout=30)
    assert thought["content"]["text"].startswith("Still waiting for the model: nothing from it "
                                                 "for 0.2 s.")
    assert stream.reached.wait(5)  # the server holds: nothing of the answer was sent
    started = time.monotonic()
    agent.notify("session/cancel", {"sessionId": sid})
    idle = agent.wait_update(state="idle", timeout=10)
    assert idle["stopReason"] == "cancelled"
    assert time.monotonic() - started < within(2)
    assert stream.disconnected.wait(5)
    seen = [m["params"]["update"] for m in agent.messages if m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] in ("agent_thought_chunk",
                                                           "agent_message_chunk")]
    assert [u["sessionUpdate"] for u in seen] == ["agent_thought_chunk"], seen
    agent.close()
