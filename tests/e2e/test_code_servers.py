"""The language servers' lives: sandboxed (only a loopback network), one per session,
restarted once after a kill -9 and then off while edits still land, gone after
session/close and after a kill -9 of the agent; a hung server (tests/support/lsp_hung.py)
bounds its wait, holds no other session's turn, and a cancel ends the wait."""

import fcntl
import json
import os
import signal
import sys
import time

import pytest

from tests.support import fake_llm as f
from tests.support.lsp import HUNG, REPO, interfaces, lsp_env, needs_servers, server_processes
from tests.support.toolcalls import agent_env, call_text, finished_calls


def model(actions):
    """A fake model that answers a user message with the tool call ``actions`` names for
    its text (a text reply when the action is a string), and a tool result with "done"."""
    server = f.FakeLLMServer()
    count = [0]

    def respond(request):
        last = request.json["messages"][-1]
        action = actions.get(last.get("content")) if last["role"] == "user" else None
        if action is None:
            return f.openai_sse(f.oa_text("done"), f.oa_finish("stop"))
        if isinstance(action, str):
            return f.openai_sse(f.oa_text(action), f.oa_finish("stop"))
        count[0] += 1
        return f.openai_sse(f.oa_tool(0, f"call_{count[0]}", action[0], json.dumps(action[1])),
                            f.oa_finish("tool_calls"))
    server.responder = respond
    return server.start()


def edit(n):
    return ("create_file", {"path": "app.py", "overwrite": True,
                            "content": f"x = 1\nprint(nope{n})\n"})


def until(test, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if test():
            return True
        time.sleep(0.05)
    return test()


def lock_free(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def workspace_in(tmp_path, name):
    path = tmp_path / name
    path.mkdir()
    return os.path.realpath(path)


@needs_servers(typescript=False)
@pytest.mark.acp_process
def test_servers_are_sandboxed_per_session_restart_once_and_end_with_the_agent(
        acp_agent, workspace, tmp_path):
    server = model({f"edit{n}": edit(n) for n in range(1, 6)} | {
        "look": ("code", {"operation": "document_symbols", "path": "app.py"})})
    try:
        agent = acp_agent(args=("--provider", "openai", "--model", "m"),
                          env={**agent_env(server), **lsp_env(tmp_path)})
        sid = agent.new_session(workspace)
        assert "nope1" in call_text(finished_calls(agent.prompt(sid, "edit1", timeout=60)[1])[0])
        _, updates, _ = agent.prompt(sid, "look", timeout=60)
        assert "app.py:1:1: x = 1" in call_text(finished_calls(updates)[0])
        first = server_processes(workspace, "pylsp")
        assert len(first) == 1  # one server for the session's writes and code calls
        assert interfaces(first[0]) == {"lo"}  # no network but its own loopback
        os.kill(first[0], signal.SIGKILL)
        assert until(lambda: not server_processes(workspace, "pylsp"))
        # started again once: the next edit has its diagnostics
        _, updates, _ = agent.prompt(sid, "edit2", timeout=60)
        assert "undefined name 'nope2'" in call_text(finished_calls(updates)[0])
        second = server_processes(workspace, "pylsp")
        assert len(second) == 1 and second != first
        os.kill(second[0], signal.SIGKILL)
        assert until(lambda: not server_processes(workspace, "pylsp"))
        # the second crash turns it off; the edit still lands
        _, updates, _ = agent.prompt(sid, "edit3", timeout=60)
        call = finished_calls(updates)[0]
        assert call["status"] == "completed" and "off for this session" in call_text(call)
        assert open(os.path.join(workspace, "app.py")).read() == "x = 1\nprint(nope3)\n"
        _, updates, _ = agent.prompt(sid, "look", timeout=60)
        call = finished_calls(updates)[0]
        assert call["status"] == "failed" and "off for this session" in call_text(call)
        assert not server_processes(workspace, "pylsp")
        # session/close stops a session's server
        closing = workspace_in(tmp_path, "closing")
        other = agent.new_session(closing)
        agent.prompt(other, "edit4", timeout=60)
        assert len(server_processes(closing, "pylsp")) == 1
        agent.request("session/close", {"sessionId": other})
        assert until(lambda: not server_processes(closing))
        # and kill -9 of the agent leaves none behind
        last = workspace_in(tmp_path, "last")
        agent.prompt(agent.new_session(last), "edit5", timeout=60)
        assert len(server_processes(last, "pylsp")) == 1
        agent.kill()
        assert until(lambda: not server_processes(last))
    finally:
        server.stop()


def test_a_hung_server_is_bounded_holds_no_other_session_and_a_cancel_ends_the_wait(
        acp_agent, workspace, tmp_path):
    extra = (f'[lsp.servers.hung]\ncommand = [{json.dumps(sys.executable)}, {json.dumps(HUNG)}]\n'
             'extensions = ["hung"]\n'
             f'[lsp.servers.stuck]\ncommand = [{json.dumps(sys.executable)}, {json.dumps(HUNG)}, '
             '"--at-start"]\nextensions = ["stuck"]\n'
             f'[sandbox]\nread_paths = [{json.dumps(os.path.join(REPO, "tests", "support"))}]\n')
    env = lsp_env(tmp_path, extra, diagnostics=8, requests=2)
    server = model({"hang": ("create_file", {"path": "a.hung", "content": "x\n"}),
                    "again": ("create_file", {"path": "b.hung", "content": "y\n"}),
                    "stuck": ("code", {"operation": "workspace_symbols", "symbol": "x",
                                       "path": "c.stuck"}),
                    "quick": "quick answer"})
    try:
        agent = acp_agent(args=("--provider", "openai", "--model", "m"),
                          env={**agent_env(server), **env})
        sid, other = agent.new_session(workspace), agent.new_session(workspace_in(tmp_path, "o"))
        started = time.monotonic()
        agent.prompt_async(sid, "hang")
        agent.wait_update("tool_call_update", session_id=sid, status="in_progress", timeout=20)
        _, quick, _ = agent.prompt(other, "quick", timeout=20)  # not held by that wait
        assert "quick answer" in json.dumps(quick)
        mark = len(agent.messages)
        agent.wait_update(state="idle", session_id=sid, timeout=30)
        assert not any(m.get("params", {}).get("update", {}).get("status") == "completed"
                       for m in agent.messages[:mark] if m.get("method") == "session/update"
                       and m["params"]["sessionId"] == sid)  # the quick turn ended first
        done = [m["params"]["update"] for m in agent.messages[mark:]
                if m.get("method") == "session/update" and m["params"]["sessionId"] == sid]
        call = finished_calls(done)[0]
        assert call["status"] == "completed" and time.monotonic() - started < 30
        assert "[diagnostics: hung gave no diagnostics within 8 s]" in call_text(call)
        assert open(os.path.join(workspace, "a.hung")).read() == "x\n"
        # a cancel ends the wait at once
        agent.prompt_async(sid, "again")
        agent.wait_update("tool_call_update", session_id=sid, status="in_progress", timeout=20)
        cancelled = time.monotonic()
        agent.notify("session/cancel", {"sessionId": sid})
        agent.wait_update(state="idle", session_id=sid, timeout=20)
        assert time.monotonic() - cancelled < 6
        # a code call to a server that never finishes starting fails within its bound
        _, updates, _ = agent.prompt(sid, "stuck", timeout=20)
        call = finished_calls(updates)[0]
        assert call["status"] == "failed" and "still starting" in call_text(call)
        assert agent.close() == 0
    finally:
        server.stop()


@needs_servers(typescript=False)
def test_an_idle_closed_session_stops_its_server_and_starts_one_when_reopened(
        acp_agent, workspace, tmp_path):
    server = model({"edit1": edit(1), "edit2": edit(2)})
    try:
        agent = acp_agent(args=("--provider", "openai", "--model", "m"),
                          env={**agent_env(server),
                               **lsp_env(tmp_path, top="idle_session_timeout = 1\n")})
        sid = agent.new_session(workspace)
        _, updates, _ = agent.prompt(sid, "edit1", timeout=60)
        assert "undefined name 'nope1'" in call_text(finished_calls(updates)[0])
        assert until(lambda: not server_processes(workspace))  # idle-closed with its session
        # a prompt while the session is still being let go is refused (the session layer's
        # own race): wait until its lock is free, then it reopens
        lock = os.path.join(agent.env["TERM2ACP_HOME"], "locks", f"{sid}.lock")
        assert until(lambda: lock_free(lock))
        _, updates, _ = agent.prompt(sid, "edit2", timeout=60)  # reopened: a server again
        assert "undefined name 'nope2'" in call_text(finished_calls(updates)[0])
        assert agent.close() == 0
    finally:
        server.stop()
