"""A session being idle-closed is neither live nor dormant for a moment: its MCP and
language servers stop, the store commits. A request that arrives then waits for the close
to end and reopens the session, as for any dormant session (sessions/dormant.py).

The window is held open by the session's MCP server (tests/support/mcp_fake.py,
``MCP_FAKE_EOF_GATE``): it tells the test when its stdin ends (the idle close stopping it)
and stops only when the test lets it (the agent's SIGKILL bounds that)."""

import contextlib
import os
import select

import pytest

from term2acp.testing.harness import is_idle, is_response
from tests.support.clock import within
from tests.support.mcp_servers import stdio_entry


@contextlib.contextmanager
def idle_close_held(acp_agent, acp_env, home, workspace, tmp_path, protocol, turns):
    """An agent whose session is being idle-closed: yields ``(agent, session id)`` while
    the close waits for its MCP server; the server is let go on leaving the block after a
    request (any) was answered, so requests sent inside were read during the close."""
    with open(acp_env["TERM2ACP_CONFIG"], "w") as fh:
        fh.write("idle_session_timeout = 1\n")
    gates = tmp_path / "gates"
    gates.mkdir()
    os.mkfifo(gates / "closing")
    os.mkfifo(gates / "gate")
    closing = os.open(gates / "closing", os.O_RDONLY | os.O_NONBLOCK)  # before the server
    try:
        agent = acp_agent(turns=turns, protocol=protocol, env={"TERM2ACP_HOME": str(home)})
        answer = agent.request("session/new", {"cwd": str(workspace), "mcpServers": [
            stdio_entry(env={"MCP_FAKE_EOF_GATE": str(gates)})]})
        sid = answer["result"]["sessionId"]
        ready, _, _ = select.select([closing], [], [], within(30))
        assert ready, "the session was not idle-closed"
    finally:
        os.close(closing)  # the server's later starts stop at once
    yield agent, sid
    # Answered after the handlers of the requests sent inside have looked the session up.
    assert agent.request("term2acp/no_such_method", {})["error"]["code"] == -32601
    with contextlib.suppress(OSError):  # ENXIO: the agent killed the server already
        gate = os.open(gates / "gate", os.O_WRONLY | os.O_NONBLOCK)
        os.write(gate, b"x")
        os.close(gate)


@pytest.mark.parametrize("protocol", [2, 1])
def test_a_prompt_during_an_idle_close_waits_and_reopens_the_session(
        acp_agent, acp_env, home, workspace, tmp_path, protocol):
    with idle_close_held(acp_agent, acp_env, home, workspace, tmp_path, protocol,
                         [[{"text": "reopened"}]]) as (agent, sid):
        pending = agent.prompt_async(sid, "again")
    answer = agent.wait_for(lambda m: is_response(m, pending), timeout=within(30))
    assert "result" in answer, answer  # not -32002 "Session not found"
    if protocol == 1:
        assert answer["result"]["stopReason"] == "end_turn"
    else:
        idle = agent.wait_for(lambda m: is_idle(m, sid), timeout=within(30))
        assert idle["params"]["update"]["stopReason"] == "end_turn"
    texts = [m["params"]["update"] for m in agent.messages if m.get("method") == "session/update"
             and m["params"]["update"].get("sessionUpdate") == "agent_message_chunk"]
    assert any(u["content"].get("text") == "reopened" for u in texts)


def test_a_config_option_set_during_an_idle_close_reopens_the_session(
        acp_agent, acp_env, home, workspace, tmp_path):
    with idle_close_held(acp_agent, acp_env, home, workspace, tmp_path, 2, []) as (agent, sid):
        pending = agent.request_async("session/set_config_option",
                                      {"sessionId": sid, "configId": "mode", "value": "plan"})
    answer = agent.wait_for(lambda m: is_response(m, pending), timeout=within(30))
    assert "result" in answer, answer
    (mode,) = [o for o in answer["result"]["configOptions"] if o.get("configId", o.get("id")) == "mode"]
    assert mode["currentValue"] == "plan"
