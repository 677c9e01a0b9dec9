"""MCP servers from the editor, through the real launcher: the scripted model calls an MCP
tool, the permission is asked, the result reaches the model and the editor; servers that
do not exist or crash; close and EOF leave no process; v2 and v1 clients."""

import contextlib
import json
import os
import sqlite3
import sys
import time

import pytest

from term2acp.testing.harness import selected
from tests.support.clock import within
from tests.support.mcp_servers import (
    HttpServer,
    everything_entry,
    everything_installed,
    stdio_entry,
    wait_gone,
)

MCP_OPTIONS = [("allow-once", "Allow once", "allow_once"),
               ("allow-tool-session", "Allow this tool for the session", "allow_always"),
               ("reject", "Reject", "reject_once")]


def call(name, **arguments):
    return {"tool_call": {"name": name, "arguments": arguments}}


def tool_updates(updates):
    return [u for u in updates if u["sessionUpdate"] in ("tool_call", "tool_call_update")]


def final(updates):
    done = [u for u in tool_updates(updates) if u.get("status") in ("completed", "failed")]
    return done[-1]


def text_of(update):
    return "".join(c["content"]["text"] for c in update.get("content") or []
                   if c.get("type") == "content" and c["content"].get("type") == "text")


def agent_text(updates):
    return "".join(u["content"]["text"] for u in updates
                   if u["sessionUpdate"] == "agent_message_chunk" and u["content"]["type"] == "text")


def history(home, session_id):
    """What the model was given: the stored conversation of the session."""
    with contextlib.closing(sqlite3.connect(os.path.join(home, "sessions.sqlite3"))) as db:
        rows = db.execute("select message from history where session_id = ? order by seq",
                          (session_id,)).fetchall()
    return [json.loads(row[0]) for row in rows]


@pytest.fixture
def mcp_agent(acp_agent, workspace, home):
    """``mcp_agent(turns, servers, protocol=2)``: an initialized agent (v2, or v1 with Zed's
    initialize) and a session with those MCP servers; returns ``(agent, session id,
    seconds session/new took)``."""
    def _start(turns, servers, protocol=2, env=None):
        agent = acp_agent(turns=turns, env={"TERM2ACP_HOME": str(home), **(env or {})},
                          protocol=protocol)
        started = time.monotonic()
        sid = agent.new_session(workspace, mcp_servers=servers)
        return agent, sid, time.monotonic() - started
    return _start


@pytest.mark.parametrize("protocol", [2, 1])
def test_initialize_advertises_mcp(acp_agent, protocol):
    agent = acp_agent(initialize=False, protocol=protocol)
    result = agent.request("initialize", agent.initialize_params)["result"]
    if protocol == 2:
        assert result["capabilities"]["session"]["mcp"] == {"stdio": {}, "http": {}}
    else:
        assert result["agentCapabilities"]["mcpCapabilities"] == {"http": True, "sse": True}


@pytest.mark.parametrize("entry, message", [
    ({"name": "rel", "command": "bin/server"}, "mcpServers[0] ('rel'): command must be an absolute path"),
    ({"type": "sse", "name": "old", "url": "http://127.0.0.1:9/sse"},
     "mcpServers[0] ('old'): the sse transport is not supported here"),
    ({"name": "bad", "command": "/bin/x", "env": {"A": 1}}, "mcpServers[0] ('bad'): env"),
])
def test_v2_refuses_a_malformed_entry_naming_it(agent, workspace, entry, message):
    answer = agent.request("session/new", {"cwd": workspace, "mcpServers": [entry]})
    assert answer["error"]["code"] == -32602 and message in answer["error"]["message"]


def test_mcp_tool_asks_once_then_runs_for_the_session(mcp_agent, home):
    turns = [[call("mcp__test__echo", text="hi")], [{"text": "done"}],
             [call("mcp__test__echo", text="again")], [{"text": "done again"}]]
    agent, sid, took = mcp_agent(turns, [stdio_entry()])
    assert took < 2.0  # session/new does not wait for the server
    asked = []
    _, updates, idle = agent.prompt(sid, "echo", timeout=60, on_request=lambda m: asked.append(m)
                                    or selected("allow-tool-session"))
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    (request,) = asked
    options = [(o["optionId"], o["name"], o["kind"]) for o in request["params"]["options"]]
    assert options == MCP_OPTIONS
    first = tool_updates(updates)[0]
    assert first["title"] == "echo (test)" and first["rawInput"] == {"text": "hi"}
    assert final(updates)["status"] == "completed" and text_of(final(updates)) == "echo: hi"
    asked.clear()
    _, updates, _ = agent.prompt(sid, "again", timeout=60, on_request=lambda m: asked.append(m)
                                 or selected("reject"))
    assert asked == [] and text_of(final(updates)) == "echo: again"  # the grant holds
    agent.close()
    results = [m["content"] for m in history(home, sid) if m["role"] == "tool"]
    assert results == ["echo: hi", "echo: again"]  # what the model was given


def test_rejected_and_is_error_calls_fail_without_ending_the_turn(mcp_agent):
    turns = [[call("mcp__test__echo", text="no"), call("mcp__test__fail", message="disk on fire")],
             [{"text": "handled"}]]
    agent, sid, _ = mcp_agent(turns, [stdio_entry()])
    asked = []  # the two calls run side by side: echo is rejected, fail allowed, in any order

    def answer(message):
        title = message["params"]["subject"]["toolCall"]["title"]
        asked.append(title)
        return selected("reject" if title.startswith("Run echo ") else "allow-once")
    _, updates, idle = agent.prompt(sid, "go", timeout=60, on_request=answer)
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    assert sorted(asked) == ["Run echo from the MCP server test", "Run fail from the MCP server test"]
    finals = [u for u in tool_updates(updates) if u.get("status") in ("completed", "failed")]
    assert [u["status"] for u in finals] == ["failed", "failed"]
    assert any("disk on fire" in text_of(u) for u in finals)
    agent.close()


def test_missing_and_crashing_servers_are_reported_and_the_session_works(mcp_agent, tmp_path):
    ghost = {"name": "ghost", "command": str(tmp_path / "no-such-server"), "args": [], "env": []}
    turns = [[call("mcp__test__crash")], [{"text": "after the crash"}],
             [call("mcp__test__echo", text="x")], [{"text": "end"}]]
    agent, sid, _ = mcp_agent(turns, [ghost, stdio_entry()])
    _, updates, idle = agent.prompt(sid, "crash it", timeout=60,
                                    on_request=lambda m: selected("allow-tool-session"))
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    assert "'ghost' could not be started" in agent_text(updates)
    crashed = final(updates)
    assert crashed["status"] == "failed" and "boom: crashing on purpose" in text_of(crashed)
    _, updates, idle = agent.prompt(sid, "again", timeout=60,
                                    on_request=lambda m: selected("allow-once"))
    assert "'test' stopped" in agent_text(updates)
    assert final(updates)["status"] == "failed"
    assert "not available" in text_of(final(updates))
    agent.close()


@pytest.mark.parametrize("ending", ["session/close", "EOF"])
def test_close_and_eof_leave_no_process(mcp_agent, ending):
    turns = [[call("mcp__test__where"), call("mcp__second__spawn_child")], [{"text": "ok"}]]
    agent, sid, _ = mcp_agent(turns, [stdio_entry(), stdio_entry("second")])
    _, updates, _ = agent.prompt(sid, "where", timeout=60,
                                 on_request=lambda m: selected("allow-once"))
    # the two calls run side by side: the JSON answer (where) sorts after the number
    texts = sorted((text_of(u) for u in tool_updates(updates) if u.get("status") == "completed"),
                   reverse=True)
    pids = [json.loads(texts[0])["pid"], int(texts[1])]
    if ending == "session/close":
        assert "result" in agent.request("session/close", {"sessionId": sid}, timeout=15)
        assert all(wait_gone(pid, 5) for pid in pids)
    agent.close()
    assert all(wait_gone(pid, 5) for pid in pids)


@pytest.mark.acp_process  # the secret is looked for in a process's whole stderr
def test_streamable_http_server(mcp_agent):
    server = HttpServer("http")
    try:
        turns = [[call("mcp__web__add", a=2, b=3)], [{"text": "five"}]]
        agent, sid, _ = mcp_agent(turns, [server.entry(headers={"Authorization": "Bearer xyz-secret"})])
        _, updates, _ = agent.prompt(sid, "add", timeout=60, on_request=lambda m: selected("allow-once"))
        assert text_of(final(updates)) == "5"
        agent.close()
        assert "xyz-secret" not in agent.stderr
    finally:
        server.stop()


@pytest.mark.skipif(not everything_installed(), reason="npm install in tests/mcp has not been run")
def test_v1_client_with_server_everything_by_bare_command(mcp_agent):
    entry = everything_entry()
    entry["command"] = "node"  # v1 editors pass bare names (npx, uvx): resolved on PATH
    turns = [[call("mcp__everything__echo", message="from v1")], [{"text": "ok"}]]
    agent, sid, _ = mcp_agent(turns, [entry], protocol=1)
    response, updates, _ = agent.prompt(sid, "echo", timeout=60,
                                        on_request=lambda m: selected("allow-once"))
    assert response["result"]["stopReason"] == "end_turn"
    texts = [c.get("content", {}).get("text") for u in tool_updates(updates)
             for c in u.get("content") or []]
    assert "Echo: from v1" in texts
    agent.close()


@pytest.mark.acp_process  # the secret is looked for in a process's whole stderr
@pytest.mark.parametrize("protocol", [2, 1])
def test_session_list_shows_the_servers_and_no_secret_is_stored_or_sent(mcp_agent, home,
                                                                         protocol):
    secret = "s3cr3t-token-for-the-store-test"
    turns = [[call("mcp__test__echo", text="hi")], [{"text": "done"}]]
    agent, sid, _ = mcp_agent(turns, [stdio_entry(env={"TEST_TOKEN": secret})], protocol)
    _, updates, _ = agent.prompt(sid, "echo", timeout=60, on_request=lambda m: selected("allow-once"))
    assert text_of(final(updates)) == "echo: hi"  # the server ran, with its env
    (listed,) = agent.request("session/list", {})["result"]["sessions"]
    assert listed["sessionId"] == sid
    assert listed["_meta"] == {"term2": {"mcpServers": [
        {"name": "test", "transport": "stdio", "command": sys.executable}]}}
    agent.close()
    assert secret not in agent.stderr
    assert secret.encode() not in b"".join(agent.lines)  # everything the agent wrote
    stored = b"".join(p.read_bytes() for p in home.iterdir() if p.name.startswith("sessions.sqlite3"))
    assert b"mcp_servers" in stored and secret.encode() not in stored


def test_a_call_past_the_call_timeout_fails_and_the_turn_goes_on(mcp_agent, tmp_path, home):
    config = tmp_path / "config.toml"
    config.write_text("[mcp]\ncall_timeout = 0.5\n")
    turns = [[call("mcp__test__slow", seconds=20)], [{"text": "went on"}]]
    agent, sid, _ = mcp_agent(turns, [stdio_entry()], env={"TERM2ACP_CONFIG": str(config)})
    started = time.monotonic()
    _, updates, idle = agent.prompt(sid, "slow", timeout=60,
                                    on_request=lambda m: selected("allow-once"))
    assert time.monotonic() - started < min(within(15), 19)  # not the tool's 20 s
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    failed = final(updates)
    assert failed["status"] == "failed"
    message = text_of(failed)
    assert "did not answer within 0.5 s, so the call was cancelled" in message
    assert "call_timeout" in message
    assert agent_text(updates).endswith("went on")
    agent.close()
    results = [m["content"] for m in history(home, sid) if m["role"] == "tool"]
    assert len(results) == 1 and "did not answer within 0.5 s" in results[0]  # the model knows


def test_an_https_server_behind_the_proxy_is_reached_as_the_providers_reach_theirs(
        mcp_agent, tmp_path):
    """MCP over HTTP takes the one network path: HTTPS_PROXY (a CONNECT tunnel to a name
    only the proxy resolves) and SSL_CERT_FILE (a CA made here) hold for it as for the
    providers; without the CA the certificate is refused and no call reaches the server."""
    from tests.support.proxy import ConnectProxy
    from tests.support.tls import make_ca

    name = "mcp.corp.invalid"
    authority = make_ca(tmp_path, names=[name])
    (tmp_path / "other").mkdir()
    server = HttpServer("http", env={"MCP_FAKE_TLS": f"{authority.cert}:{authority.key}"})
    proxy = ConnectProxy(hosts={name: "127.0.0.1"}).start()
    try:
        entry = dict(server.entry(), url=f"https://{name}:{server.port}/mcp")
        env = {"HTTPS_PROXY": proxy.url, "NO_PROXY": "", "SSL_CERT_FILE": str(authority.ca)}
        turns = [[call("mcp__web__add", a=2, b=3)], [{"text": "five"}]]
        agent, sid, _ = mcp_agent(turns, [entry], env=env)
        _, updates, _ = agent.prompt(sid, "add", timeout=60,
                                     on_request=lambda m: selected("allow-once"))
        assert final(updates)["status"] == "completed" and text_of(final(updates)) == "5"
        agent.close()
        assert {target for target, _ in proxy.tunnels} == {f"{name}:{server.port}"}

        proxy.tunnels.clear()  # the same, trusting another CA only: refused
        env["SSL_CERT_FILE"] = str(make_ca(tmp_path / "other").ca)
        agent, sid, _ = mcp_agent([[call("mcp__web__add", a=2, b=3)], [{"text": "no"}]],
                                  [entry], env=env)
        _, updates, _ = agent.prompt(sid, "add", timeout=60,
                                     on_request=lambda m: selected("allow-once"))
        assert not [u for u in updates if u.get("status") == "completed"]
        agent.close()
        assert proxy.tunnels and "certificate verify failed" in agent.stderr
    finally:
        proxy.stop()
        server.stop()
