"""MCP attacks through the real launcher (issue 23): an SSE endpoint on another origin,
secrets with stray line breaks, DEBUG logs, duplicate server names."""

import json
import socket

import pytest

from tests.e2e.test_mcp import agent_text, call, mcp_agent, selected, text_of  # noqa: F401 - a fixture
from tests.support.mcp_servers import HttpServer, stdio_entry, wait_gone


def stored_bytes(home):
    return b"".join(p.read_bytes() for p in home.iterdir() if p.name.startswith("sessions.sqlite3"))


@pytest.mark.acp_process  # the secret is looked for in a process's whole stderr
def test_an_sse_endpoint_on_another_origin_gets_no_request_and_no_header(mcp_agent):
    with socket.socket() as elsewhere:  # what an attacker's host would be: it must hear nothing
        elsewhere.bind(("127.0.0.1", 0))
        elsewhere.listen(8)
        port = elsewhere.getsockname()[1]
        server = HttpServer("sse", env={
            "MCP_FAKE_ENDPOINT": f"http://127.0.0.1:{port}/messages/?session_id={{sid}}"})
        try:
            turns = [[{"text": "no tools"}]]
            entry = server.entry(headers={"Authorization": "Bearer sse-secret-token"})
            agent, sid, _ = mcp_agent(turns, [entry], protocol=1)
            response, updates, _ = agent.prompt(sid, "hi", timeout=60)
            assert response["result"]["stopReason"] == "end_turn"
            told = agent_text(updates)
            assert "'web' could not be started" in told
            assert f"another origin (http://127.0.0.1:{port})" in told
            agent.close()
        finally:
            server.stop()
        elsewhere.setblocking(False)
        with pytest.raises(BlockingIOError):  # nobody connected, so nothing was posted
            elsewhere.accept()
    assert "sse-secret-token" not in agent.stderr


@pytest.mark.acp_process  # the secret is looked for in a process's whole stderr
def test_secrets_with_a_stray_newline_reach_no_log_message_or_store(mcp_agent, home):
    server = HttpServer("http")
    header, token = "Bearer hdr-secret-4711\n", "env-secret-0815\r\n"
    try:
        turns = [[call("mcp__web__echo", text="hi"), call("mcp__test__echo", text="ho")],
                 [{"text": "done"}]]
        agent, sid, _ = mcp_agent(turns, [server.entry(headers={"Authorization": header}),
                                          stdio_entry(env={"TOKEN": token})],
                                  env={"TERM2ACP_LOG_LEVEL": "DEBUG"})
        _, updates, _ = agent.prompt(sid, "go", timeout=60, on_request=lambda m: selected("allow-once"))
        finals = [u for u in updates if u.get("status") in ("completed", "failed")]
        assert sorted(text_of(u) for u in finals) == ["echo: hi", "echo: ho"]  # side by side
        agent.close()
    finally:
        server.stop()
    assert "session/new" in agent.stderr  # the DEBUG wire log ran
    for secret in ("hdr-secret-4711", "env-secret-0815"):
        assert secret not in agent.stderr
        assert secret.encode() not in stored_bytes(home)
        assert secret.encode() not in b"".join(agent.lines)


@pytest.mark.parametrize("servers, message", [
    ([{"type": "http", "name": "web", "url": "http://127.0.0.1:9/mcp",
       "headers": [{"name": "Authorization", "value": "Bearer tok-9\r\nX-Injected: 1"}]}],
     "invalid MCP server: mcpServers[0] ('web'): the value of header Authorization contains a "
     "line break or another control character (the value is not shown)"),
    ([stdio_entry("twin"), stdio_entry("twin")],
     "mcpServers[1] ('twin'): the name is already used by mcpServers[0]"),
])
def test_session_new_refuses_injected_headers_and_duplicate_names(agent, workspace, servers, message):
    answer = agent.request("session/new", {"cwd": workspace, "mcpServers": servers})
    assert answer["error"]["code"] == -32602 and message in answer["error"]["message"]
    assert "tok-9" not in str(answer)


@pytest.mark.acp_process
def test_a_killed_agent_leaves_no_server_nor_its_child_even_one_that_ignores_eof(mcp_agent):
    turns = [[call("mcp__test__where"), call("mcp__test__spawn_child")], [{"text": "ok"}]]
    agent, sid, _ = mcp_agent(turns, [stdio_entry(env={"MCP_FAKE_IGNORE_EOF": "1"})])
    _, updates, _ = agent.prompt(sid, "where", timeout=60, on_request=lambda m: selected("allow-once"))
    # the two calls run side by side: which answered first does not matter
    texts = sorted((text_of(u) for u in updates if u.get("status") == "completed"), reverse=True)
    pids = [json.loads(texts[0])["pid"], int(texts[1])]
    agent.kill()  # SIGKILL: nothing of the agent's own clean-up runs
    assert wait_gone(pids[0], 10), "the server outlived the agent"
    assert wait_gone(pids[1], 10), "the server's child outlived the agent"


def test_oversized_mcp_input_drops_those_servers_and_the_session_goes_on(mcp_agent):
    turns = [[call("mcp__big__big", size=17 << 20)], [{"text": "after"}],
             [call("mcp__ok__echo", text="still here")], [{"text": "end"}]]
    many = stdio_entry("many", env={"MCP_FAKE_MANY": "5000", "MCP_FAKE_PAGE": "1000"})
    agent, sid, _ = mcp_agent(turns, [many, stdio_entry("big", env={"MCP_FAKE_MANY": "0"}),
                                      stdio_entry("ok")])
    _, updates, idle = agent.prompt(sid, "big", timeout=60, on_request=lambda m: selected("allow-once"))
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    assert "'many' could not be started: the server lists more than 5000 tools" in agent_text(updates)
    failed = [u for u in updates if u.get("status") == "failed"]
    assert "sent a line larger than 16 MiB, the limit; it was disconnected" in text_of(failed[-1])
    _, updates, idle = agent.prompt(sid, "echo", timeout=60, on_request=lambda m: selected("allow-once"))
    assert "'big' stopped" in agent_text(updates)
    done = [u for u in updates if u.get("status") == "completed"]
    assert text_of(done[-1]) == "echo: still here"
    agent.close()


def test_a_request_offers_at_most_128_tools_and_the_model_enables_a_left_out_one(
        mcp_agent, acp_agent, workspace):
    from tests.support import fake_llm as f

    def names(request):
        return [t.get("name") or t["function"]["name"] for t in request.json["tools"]]

    model = f.FakeLLMServer().start()
    try:
        model.enqueue(
            f.openai_sse(f.oa_tool(0, "call_1", "mcp_tools",
                                   json.dumps({"enable": ["mcp__big__many_299"]})),
                         f.oa_finish("tool_calls")),
            f.openai_sse(f.oa_text("enabled"), f.oa_finish("stop")))
        agent = acp_agent(args=("--provider", "openai", "--model", "m"), env={
            "OPENAI_BASE_URL": model.openai_url, "OPENAI_API_KEY": "sk-test-1234567"})
        sid = agent.new_session(workspace, mcp_servers=[
            stdio_entry("big", env={"MCP_FAKE_MANY": "300"})])
        _, updates, idle = agent.prompt(sid, "go", timeout=60)
        assert idle["params"]["update"]["stopReason"] == "end_turn"
        told = agent_text(updates)
        assert "MCP tools are not offered to the model (big: " in told
        assert "enable them with its mcp_tools tool" in told
        first, second = (names(r) for r in model.requests[:2])
        assert len(first) == len(set(first)) == 128 and len(second) == 128
        assert "mcp_tools" in first and "mcp__big__many_299" not in first
        assert "mcp__big__many_299" in second  # enabled for the next step
        agent.close()
    finally:
        model.stop()
