"""Long sessions against a small context window: compaction, resume, errors shown as text.

The fake OpenAI-compatible server (and the scripted provider, for determinism) refuse a
request whose message content is over 6,000 characters, or over the system prompt plus
4,500 when that is larger, like OpenAI's ``context_length_exceeded``. The agent learns the
window from that error (or from config) and compacts; twelve ~1,500-character prompts in
one session must all end ``end_turn``.
"""

import json

import pytest

from tests.support import fake_llm as f

LIMIT = (6000, 4500)
PROMPTS = 12
V2_COMPACTION = {"protocolVersion": 2, "info": {"name": "t", "version": "1"},
                 "capabilities": {"session": {"compaction": {}}}}
V1_COMPACTION = {"protocolVersion": 1, "clientInfo": {"name": "t", "version": "1"},
                 "clientCapabilities": {"session": {"compaction": {}}}}


def long_prompt(number):
    head = f"Note {number}: please remember the token KEY-{number:02d}. "
    return head + ("The quick brown fox jumps over the lazy dog. " * 40)[:1500 - len(head)]


def is_summary_request(body):
    system = next((m["content"] for m in body["messages"] if m["role"] == "system"), "")
    return system.startswith("You compact")


@pytest.fixture
def server():
    srv = f.FakeLLMServer()
    srv.context_limit = LIMIT
    srv.summaries = 0

    def respond(request):
        if is_summary_request(request.json):
            srv.summaries += 1
            return f.openai_sse(f.oa_text(f"Summary {srv.summaries}: the user sent numbered "
                                          "notes with KEY tokens."), f.oa_finish("stop"))
        return f.openai_sse(f.oa_text("Noted."), f.oa_finish("stop"), f.oa_usage(100, 2))

    srv.responder = respond
    srv.start()
    yield srv
    srv.stop()


def openai_env(server, key="sk-test-key-123456"):
    return {"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": key}


@pytest.fixture
def srv():
    """A fake OpenAI-compatible server with nothing queued: the test enqueues its answers."""
    server = f.FakeLLMServer().start()
    yield server
    server.stop()


def openai_agent(acp_agent, server, key="sk-t-123456", **kwargs):
    """An initialized agent on the openai provider (model "m") talking to ``server``."""
    return acp_agent(args=("--provider", "openai", "--model", "m"),
                     env=openai_env(server, key), **kwargs)


def start(acp_agent, protocol, init, env, args=()):
    agent = acp_agent(args=args, env=env, protocol=protocol, initialize=False)
    agent.initialize_params = init
    agent.initialize()
    return agent


def run_prompts(agent, sid, count, first=1):
    seen = []
    for number in range(first, first + count):
        _, updates, end = agent.prompt(sid, long_prompt(number), timeout=60)
        reason = end["result"]["stopReason"] if agent.protocol == 1 \
            else end["params"]["update"]["stopReason"]
        assert reason == "end_turn", (number, end, agent.stderr[-3000:])
        seen += updates
    return seen


def compactions(updates):
    return [u for u in updates if u["sessionUpdate"] == "compaction_update"]


def told_text(updates):
    return "".join(u["content"]["text"] for u in updates
                   if u["sessionUpdate"] in ("agent_message_chunk",) and u["content"]["type"] == "text")


def thought_text(updates):
    return "".join(u["content"]["text"] for u in updates
                   if u["sessionUpdate"] == "agent_thought_chunk")


def refused_after_first(server):
    """Requests over the limit after the first refusal (must be none)."""
    return server.refused[1:]


def test_twelve_long_prompts_against_a_small_window_v2(acp_agent, workspace, server):
    env = openai_env(server)
    args = ("--provider", "openai", "--model", "small-model")
    agent = start(acp_agent, 2, V2_COMPACTION, env, args)
    sid = agent.new_session(workspace)
    updates = run_prompts(agent, sid, PROMPTS)
    done = [u for u in compactions(updates) if u["status"] == "completed"]
    assert done and all(u["summary"][0]["text"].startswith("Summary") for u in done)
    assert [u["status"] for u in compactions(updates)][:2] == ["in_progress", "completed"]
    assert len(server.refused) == 1 and not refused_after_first(server)
    # what was sent after compaction carries the summary and the latest prompt, not all
    last = server.requests[-1].json
    text = json.dumps(last["messages"])
    assert "Summary" in text and "KEY-12" in text and "KEY-01" not in text
    assert all(r.content_chars <= r.limit for r in server.requests if r not in server.refused)
    assert agent.close() == 0

    # resume with replay: the whole conversation comes back, and the session goes on
    # from the compacted state without another overflow
    agent = start(acp_agent, 2, V2_COMPACTION, env, args)
    response = agent.request("session/resume", {"sessionId": sid, "cwd": str(workspace),
                                                "replayFrom": {"type": "start"}}, timeout=30)
    assert "result" in response, response
    replayed = [m["params"]["update"] for m in agent.messages if m.get("method") == "session/update"]
    users = [u for u in replayed if u["sessionUpdate"] == "user_message"]
    assert len(users) == PROMPTS and "KEY-01" in users[0]["content"][0]["text"]
    assert any(u["sessionUpdate"] == "compaction_update" and u["status"] == "completed"
               for u in replayed)
    before = len(server.requests)
    run_prompts(agent, sid, 1, first=PROMPTS + 1)
    assert len(server.refused) == 1
    resumed = server.requests[before].json
    assert "Summary" in json.dumps(resumed["messages"])
    assert agent.close() == 0


def test_without_compaction_support_the_user_reads_an_agent_message(acp_agent, workspace, server):
    agent = start(acp_agent, 2, {"protocolVersion": 2, "info": {"name": "t", "version": "1"}},
                  openai_env(server), ("--provider", "openai", "--model", "small-model"))
    sid = agent.new_session(workspace)
    updates = run_prompts(agent, sid, 5)
    assert not compactions(updates)
    assert "Context compacted because the model refused the request as too long" in told_text(updates)
    assert not refused_after_first(server)
    assert agent.close() == 0


def scripted(tmp_path, **extra):
    path = tmp_path / "limited.json"
    record = tmp_path / "requests.jsonl"
    path.write_text(json.dumps(dict({
        "turns": [], "default_turn": [{"text": "Noted."}],
        "summary": "Summary: the user sent numbered notes with KEY tokens.",
        "context_limit": LIMIT[0], "context_limit_over_system": LIMIT[1],
        "record": str(record)}, **extra)))
    return path, record


def requests_of(record):
    return [json.loads(line) for line in record.read_text().splitlines()]


@pytest.mark.parametrize("protocol", [1, 2])
def test_twelve_long_prompts_with_the_scripted_provider(acp_agent, workspace, tmp_path, protocol):
    path, record = scripted(tmp_path)
    init = V1_COMPACTION if protocol == 1 else V2_COMPACTION
    agent = start(acp_agent, protocol, init, {"TERM2ACP_SCRIPT": str(path)},
                  ("--provider", "scripted"))
    sid = agent.new_session(workspace)
    updates = run_prompts(agent, sid, PROMPTS)
    assert any(u["status"] == "completed" and u["summary"] for u in compactions(updates))
    sent = requests_of(record)
    refused = [n for n, r in enumerate(sent) if r["refused"]]
    assert len(refused) == 1, sent
    assert any(r["purpose"] == "compaction" for r in sent)
    assert agent.close() == 0

    agent = start(acp_agent, protocol, init, {"TERM2ACP_SCRIPT": str(path)},
                  ("--provider", "scripted"))
    if protocol == 1:
        response = agent.request("session/load", {"sessionId": sid, "cwd": str(workspace),
                                                  "mcpServers": []}, timeout=30)
    else:
        response = agent.request("session/resume", {"sessionId": sid, "cwd": str(workspace),
                                                    "replayFrom": {"type": "start"}}, timeout=30)
    assert "result" in response, response
    replayed = [m["params"]["update"] for m in agent.messages if m.get("method") == "session/update"]
    assert sum("KEY-" in json.dumps(u) for u in replayed
               if u["sessionUpdate"] in ("user_message", "user_message_chunk")) == PROMPTS
    assert any(u["sessionUpdate"] == "compaction_update" for u in replayed)
    run_prompts(agent, sid, 1, first=PROMPTS + 1)
    assert sum(r["refused"] for r in requests_of(record)) == 1
    assert agent.close() == 0


def test_config_window_compacts_before_any_overflow_v1_agent_message(acp_agent, workspace, tmp_path):
    path, record = scripted(tmp_path)
    (tmp_path / "config.toml").write_text("context_window = 2200\n")
    agent = start(acp_agent, 1, {"protocolVersion": 1, "clientInfo": {"name": "t", "version": "1"}},
                  {"TERM2ACP_SCRIPT": str(path)}, ("--provider", "scripted"))
    sid = agent.new_session(workspace)
    updates = run_prompts(agent, sid, PROMPTS)
    assert "Context compacted because it neared the model's context window" in told_text(updates)
    assert not any(r["refused"] for r in requests_of(record))
    assert agent.close() == 0


def test_a_single_huge_tool_result_is_truncated_with_a_note(acp_agent, workspace, tmp_path):
    # a window above the fixed overhead (system prompt and tool schemas: about 5,000 tokens)
    (tmp_path / "config.toml").write_text("context_window = 10000\n")
    with open(f"{workspace}/big.txt", "w") as fh:
        fh.write("line of a big file\n" * 5000)
    path, record = scripted(tmp_path, context_limit=None, turns=[
        [{"tool_call": {"name": "read_file", "arguments": {"path": "big.txt"}}}],
        [{"text": "Read it."}]])
    agent = start(acp_agent, 2, V2_COMPACTION, {"TERM2ACP_SCRIPT": str(path)},
                  ("--provider", "scripted"))
    sid = agent.new_session(workspace)
    _, _, idle = agent.prompt(sid, "read big.txt", timeout=30)
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    sent = requests_of(record)
    assert sent[-1]["chars"] < 10000 * 4 * 0.5  # the result was cut to a share of the window
    assert agent.close() == 0


def test_compaction_that_cannot_help_says_why(acp_agent, workspace, tmp_path):
    path, _record = scripted(tmp_path, context_limit=800, context_limit_over_system=100)
    agent = start(acp_agent, 2, V2_COMPACTION, {"TERM2ACP_SCRIPT": str(path)},
                  ("--provider", "scripted"))
    sid = agent.new_session(workspace)
    _, updates, idle = agent.prompt(sid, long_prompt(1), timeout=30)
    assert idle["params"]["update"]["stopReason"] == "_term2_error"
    text = told_text(updates)
    assert "compacting failed because" in text and "context window" in text
    assert agent.close() == 0


def test_slash_compact_compacts_on_demand(acp_agent, workspace, tmp_path):
    path, record = scripted(tmp_path, context_limit=None)
    agent = start(acp_agent, 2, V2_COMPACTION, {"TERM2ACP_SCRIPT": str(path)},
                  ("--provider", "scripted"))
    sid = agent.new_session(workspace)
    run_prompts(agent, sid, 3)
    _, updates, idle = agent.prompt(sid, "/compact", timeout=30)
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    done = [u for u in compactions(updates) if u["status"] == "completed"]
    assert len(done) == 1 and done[0]["summary"][0]["text"].startswith("Summary")
    assert [r["purpose"] for r in requests_of(record)].count("compaction") == 1
    assert agent.close() == 0


# ---------------------------------------------------------------- errors a person can see
@pytest.mark.parametrize("protocol", [1, 2])
def test_a_rejected_key_is_explained_in_the_conversation(acp_agent, workspace, srv, protocol):
    srv.enqueue(f.Status(401, {"error": {"message": "Incorrect API key provided"}}))
    agent = openai_agent(acp_agent, srv, "sk-secret-abcdef123456", protocol=protocol)
    sid = agent.new_session(workspace)
    response, updates, end = agent.prompt(sid, "hi", timeout=30)
    told = told_text(updates) if protocol == 2 else response["error"]["message"]
    assert "rejected the API key" in told and "OPENAI_API_KEY" in told
    if protocol == 1:  # said once: as the prompt's error, not also as an answer
        assert response["error"]["code"] == -32603 and not told_text(updates)
    else:
        assert end["params"]["update"]["stopReason"] == "_term2_error"
    assert "sk-secret-abcdef123456" not in json.dumps(agent.messages)
    assert agent.close() == 0


def test_an_unreachable_server_names_the_url(acp_agent, workspace):
    url = f"http://127.0.0.1:{f.closed_port()}/v1"
    agent = acp_agent(args=("--provider", "openai", "--model", "m"),
                      env={"OPENAI_BASE_URL": url, "OPENAI_API_KEY": "sk-test-123456"})
    sid = agent.new_session(workspace)
    _, updates, idle = agent.prompt(sid, "hi", timeout=60)
    assert idle["params"]["update"]["stopReason"] == "_term2_error"
    told = told_text(updates)
    # the first request to a server goes to its Responses API (providers/compat.py)
    assert "Could not reach the model provider" in told and f"{url}/responses" in told
    assert agent.close() == 0


def test_rate_limits_are_retried_visibly_then_answered(acp_agent, workspace, srv):
    srv.enqueue(f.Status(429, {"error": {"message": "slow down"}}, {"retry-after": "0.2"}),
                f.openai_sse(f.oa_text("fine now"), f.oa_finish("stop")))
    agent = openai_agent(acp_agent, srv)
    sid = agent.new_session(workspace)
    _, updates, idle = agent.prompt(sid, "hi", timeout=30)
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    told = told_text(updates)
    assert "Retrying in 0.2 s (HTTP 429 Too Many Requests)" in thought_text(updates)
    assert told == "fine now" and len(srv.requests) == 2  # the notice is no answer text
    assert agent.close() == 0


def test_rate_limit_that_outlasts_the_retries_says_so(acp_agent, workspace, srv):
    for _ in range(3):
        srv.enqueue(f.Status(429, {"error": {"message": "slow down"}}, {"retry-after": "0.1"}))
    agent = openai_agent(acp_agent, srv)
    sid = agent.new_session(workspace)
    _, updates, idle = agent.prompt(sid, "hi", timeout=30)
    assert idle["params"]["update"]["stopReason"] == "_term2_error"
    told = told_text(updates)
    assert thought_text(updates).count("Retrying in 0.1 s") == 2 and "Retrying" not in told
    assert "rate limiting requests" in told and "Please retry after 0.1 s." in told
    assert agent.close() == 0


def pairing_problems(body):
    """Tool messages that do not answer a call of the assistant message before them, and
    calls left without an answer (what OpenAI refuses with a 400)."""
    problems, waiting = [], set()
    for message in body["messages"]:
        if message["role"] == "tool":
            if message["tool_call_id"] not in waiting:
                problems.append(f"orphan result {message['tool_call_id']}")
            waiting.discard(message["tool_call_id"])
            continue
        if waiting:
            problems.append(f"unanswered {sorted(waiting)}")
        waiting = {c["id"] for c in message.get("tool_calls") or ()}
    return problems


def test_compaction_in_the_middle_of_a_turn_keeps_calls_with_their_results(acp_agent, workspace):
    for n in range(8):
        with open(f"{workspace}/f{n}.txt", "w") as fh:
            fh.write(f"file {n} " + "lorem ipsum dolor sit amet " * 45 + "\n")
    srv = f.FakeLLMServer()
    srv.context_limit = LIMIT
    state = {"calls": 0, "problems": []}

    def respond(request):
        body = request.json
        state["problems"] += pairing_problems(body)
        if is_summary_request(body):
            return f.openai_sse(f.oa_text("Summary: read files f0.. so far."), f.oa_finish("stop"))
        if state["calls"] < 8:
            n = state["calls"]
            state["calls"] += 1
            return f.openai_sse(f.oa_tool(0, f"call_{n}", "read_file", json.dumps({"path": f"f{n}.txt"})),
                                f.oa_finish("tool_calls"))
        return f.openai_sse(f.oa_text("Read them all."), f.oa_finish("stop"))

    srv.responder = respond
    srv.start()
    try:
        agent = start(acp_agent, 2, V2_COMPACTION, openai_env(srv),
                      ("--provider", "openai", "--model", "small-model"))
        sid = agent.new_session(workspace)
        _, updates, idle = agent.prompt(sid, "Read f0.txt to f7.txt one by one.", timeout=60)
        assert idle["params"]["update"]["stopReason"] == "end_turn", agent.stderr[-2000:]
        assert any(u["status"] == "completed" for u in compactions(updates))
        assert state["calls"] == 8 and not state["problems"]
        assert len(srv.refused) <= 1
        assert agent.close() == 0
    finally:
        srv.stop()


def test_cancel_ends_a_retry_wait(acp_agent, workspace, srv):
    srv.enqueue(f.Status(503, {"error": {"message": "overloaded"}}, {"retry-after": "30"}))
    agent = openai_agent(acp_agent, srv)
    sid = agent.new_session(workspace)
    agent.prompt_async(sid, "hi")
    chunk = agent.wait_update("agent_thought_chunk", session_id=sid, timeout=20)
    assert chunk["content"]["text"].startswith("Retrying in 30 s (HTTP 503")
    agent.notify("session/cancel", {"sessionId": sid})
    idle = agent.wait_update("state_update", state="idle", session_id=sid, timeout=5)
    assert idle["stopReason"] == "cancelled" and len(srv.requests) == 1
    assert agent.close() == 0


def test_twelve_long_prompts_against_a_small_window_v1_then_load(acp_agent, workspace, server):
    env, args = openai_env(server), ("--provider", "openai", "--model", "small-model")
    agent = start(acp_agent, 1, V1_COMPACTION, env, args)
    sid = agent.new_session(workspace)
    updates = run_prompts(agent, sid, PROMPTS)
    assert any(u["status"] == "completed" and u["summary"] for u in compactions(updates))
    assert len(server.refused) == 1
    assert all(r.content_chars <= r.limit for r in server.requests if r not in server.refused)
    assert agent.close() == 0
    agent = start(acp_agent, 1, V1_COMPACTION, env, args)
    response = agent.request("session/load", {"sessionId": sid, "cwd": str(workspace),
                                              "mcpServers": []}, timeout=30)
    assert "result" in response, response
    replayed = [m["params"]["update"] for m in agent.messages if m.get("method") == "session/update"]
    assert sum(u["sessionUpdate"] == "user_message_chunk" and "KEY-" in u["content"]["text"]
               for u in replayed) == PROMPTS
    run_prompts(agent, sid, 1, first=PROMPTS + 1)
    assert len(server.refused) == 1
    assert agent.close() == 0
