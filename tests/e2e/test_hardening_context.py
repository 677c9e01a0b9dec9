"""The context estimate counts everything a request carries and keeps no misread window,
through the launcher against the fake OpenAI server: with tool schemas that push a request
over the threshold, compaction runs (their ~13 KB were left out); one overflow error on a
small request is forgotten once a larger request has gone through (every later request
was compacted first)."""

import json

import pytest

from tests.support import fake_llm as f

LONG = "The answer goes on. " * 150  # 3,000 characters


def is_summary(request):
    system = next((m["content"] for m in request.json["messages"] if m["role"] == "system"), "")
    return system.startswith("You compact")


@pytest.fixture
def srv():
    server = f.FakeLLMServer()
    server.summaries = 0
    server.answers = []  # what the next non-summary requests get, in order; then "ok"

    def respond(request):
        if is_summary(request):
            server.summaries += 1
            return f.openai_sse(f.oa_text("Summary: the user said hi."), f.oa_finish("stop"))
        if server.answers:
            return server.answers.pop(0)
        return f.openai_sse(f.oa_text("ok"), f.oa_finish("stop"))
    server.responder = respond
    server.start()
    yield server
    server.stop()


def agent_on(acp_agent, srv):
    return acp_agent(args=("--provider", "openai", "--model", "m"),
                     env={"OPENAI_BASE_URL": srv.openai_url, "OPENAI_API_KEY": "sk-t-1"})


def test_tool_schemas_count_toward_the_threshold(acp_agent, acp_workspace, srv, acp_env):
    with open(acp_env["TERM2ACP_CONFIG"], "w") as fh:
        fh.write("model_titles = false\n")
    probe = agent_on(acp_agent, srv)
    probe.prompt(probe.new_session(acp_workspace), "hi", timeout=30)
    probe.close()
    sent = srv.requests[-1].json
    system = len(sent["messages"][0]["content"])
    tools = len(json.dumps(sent["tools"], separators=(",", ":")))
    assert tools > 8000  # what this test is about: the schemas are big
    # a window whose threshold the second request (with the long answer) passes, the first
    # does not; without the schemas, neither would
    window = int((system + tools + len(LONG) / 2) / 4 / 0.8)
    with open(acp_env["TERM2ACP_CONFIG"], "w") as fh:
        fh.write(f"model_titles = false\ncontext_window = {window}\n")
    srv.answers = [f.openai_sse(f.oa_text(LONG), f.oa_finish("stop"))]
    agent = agent_on(acp_agent, srv)
    sid = agent.new_session(acp_workspace)
    agent.prompt(sid, "hi", timeout=30)
    assert srv.summaries == 0  # nothing older to summarize yet
    _, _, idle = agent.prompt(sid, "and now?", timeout=30)
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    assert srv.summaries == 1
    assert agent.close() == 0


def test_a_window_learned_from_a_small_request_is_forgotten(acp_agent, acp_workspace, srv,
                                                            acp_env):
    with open(acp_env["TERM2ACP_CONFIG"], "w") as fh:
        fh.write("model_titles = false\n")
    overflow = f.Status(400, {"error": {
        "message": "This model's maximum context length is 600 tokens. However, your messages "
                   "resulted in 30000 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error", "code": "context_length_exceeded"}})
    agent = agent_on(acp_agent, srv)
    sid = agent.new_session(acp_workspace)
    agent.prompt(sid, "one", timeout=30)
    srv.answers = [overflow]  # misread: the agent learns a window of 512 tokens
    _, _, idle = agent.prompt(sid, "two", timeout=30)
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    compacted = srv.summaries
    assert compacted  # compacted to resend (in pieces: the window is small), and it went through
    for words in ("three", "four"):
        _, _, idle = agent.prompt(sid, words, timeout=30)
        assert idle["params"]["update"]["stopReason"] == "end_turn"
    assert srv.summaries == compacted  # the larger request that went through proved it wrong
    assert agent.close() == 0
