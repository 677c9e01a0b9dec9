"""The v1 face over the real launcher (Zed's initialize), every message checked against the
v1 schema: turns answered with stopReason when they end, tool calls, the editor's files,
cancel, failures, load with replay in a second process, list, resume, close, MCP notice."""

import os
import shutil
import time

import pytest

from term2acp.testing.harness import ANSWERED, is_response, is_update
from tests.support.clock import within


@pytest.fixture
def v1(acp_agent, acp_workspace):
    """``v1(turns, **kw)``: an initialized v1 agent on scripted turns and a new session."""
    def start(turns, env=None, mcp_servers=None, **extra):
        agent = acp_agent(turns=turns, env=env, protocol=1, **extra)
        return agent, agent.new_session(acp_workspace, mcp_servers=mcp_servers)
    return start


PLAIN_V1_INITIALIZE = {"protocolVersion": 1,
                       "clientCapabilities": {"fs": {"readTextFile": True,
                                                     "writeTextFile": True}},
                       "clientInfo": {"name": "plain-v1", "version": "1.0"}}


def call(name, **arguments):
    return {"tool_call": {"name": name, "arguments": arguments}}


def kinds(updates):
    return [u["sessionUpdate"] for u in updates]


def stop_reason(response):
    return response["result"]["stopReason"]


def tool_reports(updates):
    return [u for u in updates if u["sessionUpdate"] in ("tool_call", "tool_call_update")]


def texts(updates, kind="agent_message_chunk"):
    return "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == kind)


# ---------------------------------------------------------------- text turns
def test_text_turn_answers_stop_reason_after_every_update(v1):
    agent, sid = v1([[{"thought": "Let me think."}, {"text": "Hello "}, {"text": "there."},
                      {"usage": {"input": 40, "output": 4}}]], context_window=16000)
    response, updates, _ = agent.prompt(sid, "Say hello")
    assert response["result"] == {"stopReason": "end_turn", "usage": {
        "totalTokens": 44, "inputTokens": 40, "outputTokens": 4}}
    assert texts(updates) == "Hello there." and texts(updates, "agent_thought_chunk") == "Let me think."
    assert "usage_update" in kinds(updates) and "session_info_update" in kinds(updates)
    # v1 has no state_update, and the editor shows the user's prompt itself
    assert not {"state_update", "user_message", "user_message_chunk"} & set(kinds(updates))
    last_update = max(i for i, m in enumerate(agent.messages) if is_update(m, sid))
    answered = next(i for i, m in enumerate(agent.messages) if m is response)
    assert last_update < answered
    assert agent.close() == 0


@pytest.mark.parametrize("stop", ["max_tokens", "refusal"])
def test_model_stop_reasons_reach_the_prompt_response(v1, stop):
    agent, sid = v1([[{"text": "partial"}, {"stop": stop}]])
    response, _, _ = agent.prompt(sid, "go")
    assert stop_reason(response) == stop
    agent.close()


def test_max_turn_requests_ends_the_turn(v1):
    loop = [call("list_directory", path=".")]
    agent, sid = v1([loop, loop, loop], env={"TERM2ACP_MAX_TURN_REQUESTS": "2"})
    response, _, _ = agent.prompt(sid, "go")
    assert stop_reason(response) == "max_turn_requests"
    agent.close()


def test_a_failed_turn_is_an_error_a_person_can_act_on(v1):
    agent, sid = v1([[{"text": "starting"}, {"error": "401 invalid api key"}]])
    response, updates, _ = agent.prompt(sid, "go")
    error = response["error"]
    assert error["code"] == -32603
    assert "401 invalid api key" in error["message"]
    # the partial answer stays; what went wrong is said once, as the prompt's error (issue 39)
    assert texts(updates) == "starting"
    # the session is still usable
    assert agent.request("session/list", {})["result"]["sessions"]
    agent.close()


def test_cancel_mid_stream_answers_cancelled_promptly(v1):
    agent, sid = v1([[{"text": "streaming "}, {"hang": True}], [{"text": "after"}]])
    request_id = agent.prompt_async(sid, "go")
    agent.wait_update("agent_message_chunk", session_id=sid)
    started = time.monotonic()
    agent.notify("session/cancel", {"sessionId": sid})
    response = agent.wait_for(lambda m: is_response(m, request_id), timeout=5)
    assert stop_reason(response) == "cancelled" and time.monotonic() - started < within(2)
    again, updates, _ = agent.prompt(sid, "again")  # the next turn runs normally
    assert stop_reason(again) == "end_turn" and texts(updates) == "after"
    agent.close()


def test_a_cancel_in_the_same_write_as_its_prompt_answers_cancelled(v1):
    # Issue 16: the cancel used to be lost (read before the prompt was admitted).
    agent, sid = v1([[{"text": "after"}]])
    for round_id in range(1, 6):
        agent.send_lines([
            {"jsonrpc": "2.0", "id": round_id, "method": "session/prompt", "params": {
                "sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}},
            {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}])
        response = agent.wait_for(lambda m, i=round_id: is_response(m, i), timeout=10)
        assert stop_reason(response) == "cancelled", f"round {round_id}: {response}"
    again, updates, _ = agent.prompt(sid, "again")  # no model request was made before
    assert stop_reason(again) == "end_turn" and texts(updates) == "after"
    agent.close()


def test_a_second_prompt_while_busy_is_held_and_close_ends_both(v1):
    agent, sid = v1([[{"hang": True}]])
    first = agent.prompt_async(sid, "go")
    agent.wait_update("session_info_update", session_id=sid)
    held = agent.prompt_async(sid, "x")  # held until the first ends (tests/e2e/test_clients.py)
    assert agent.request("session/close", {"sessionId": sid})["result"] == {}
    response = next(m for m in agent.messages if is_response(m, first))  # came before
    assert stop_reason(response) == "cancelled"
    response = next((m for m in agent.messages if is_response(m, held)), None) \
        or agent.wait_for(lambda m: is_response(m, held))
    assert stop_reason(response) == "cancelled"
    agent.close()


def test_prompt_content_rules(v1):
    agent, sid = v1([[{"text": "seen"}]])
    image = agent.request("session/prompt", {"sessionId": sid, "prompt": [
        {"type": "text", "text": "look"}, {"type": "image", "data": "AAAA", "mimeType": "image/png"}]})
    assert image["error"]["code"] == -32602 and "images" in image["error"]["message"]
    request_id = agent.request_async("session/prompt", {"sessionId": sid, "prompt": [
        {"type": "text", "text": "use this"},
        {"type": "resource", "resource": {"uri": "file:///a.py", "text": "x = 1"}}]})
    assert stop_reason(agent.wait_for(lambda m: is_response(m, request_id))) == "end_turn"
    agent.close()


# ---------------------------------------------------------------- tool calls
def test_tool_calls_are_announced_with_tool_call_then_updated(v1, acp_workspace):
    with open(os.path.join(acp_workspace, "a.py"), "w") as fh:
        fh.write("x = 1\n")
    agent, sid = v1([[call("read_file", path="a.py"),
                      call("edit_file", path="a.py", edits=[{"old_text": "x = 1",
                                                             "new_text": "x = 2"}]),
                      call("create_file", path="pkg/new.py", content="y = 1\n"),
                      call("no_such_tool")],
                     [{"text": "done"}]])
    response, updates, _ = agent.prompt(sid, "go")
    assert stop_reason(response) == "end_turn"
    reports = tool_reports(updates)
    firsts = {}
    for report in reports:
        firsts.setdefault(report["toolCallId"], report)
    assert len(firsts) == 4
    for first in firsts.values():
        assert first["sessionUpdate"] == "tool_call"
        assert first["title"] and first["status"] == "pending" and "rawInput" in first
    assert [f["kind"] for f in firsts.values()] == ["read", "edit", "edit", "other"]
    later = [r for r in reports if r not in firsts.values()]
    assert later and all(r["sessionUpdate"] == "tool_call_update" for r in later)
    assert firsts[reports[0]["toolCallId"]]["locations"] == [
        {"path": os.path.join(acp_workspace, "a.py"), "line": 1}]
    finals = {r["toolCallId"]: r for r in later if r.get("status") in ("completed", "failed")}
    read, edit, create, missing = (finals[i] for i in firsts)
    assert read["status"] == "completed" and "x = 1" in read["content"][0]["content"]["text"]
    assert edit["content"] == [{"type": "diff", "path": os.path.join(acp_workspace, "a.py"),
                                "oldText": "x = 1\n", "newText": "x = 2\n"}]
    assert create["content"] == [{"type": "diff", "newText": "y = 1\n",
                                  "path": os.path.join(acp_workspace, "pkg", "new.py")}]
    assert missing["status"] == "failed" and "no_such_tool" in missing["content"][0]["content"]["text"]
    assert open(os.path.join(acp_workspace, "a.py")).read() == "x = 2\n"
    assert open(os.path.join(acp_workspace, "pkg", "new.py")).read() == "y = 1\n"
    agent.close()


@pytest.mark.skipif(shutil.which("bwrap") is None and not os.environ.get("CI"),
                    reason="bubblewrap is not installed")
def test_shell_output_streams_as_tool_call_text(acp_agent, acp_workspace):
    """A v1 client that does not advertise ``_meta.terminal_output`` reads the text view."""
    command = "echo first; sleep 0.5; echo second; exit 3"
    agent = acp_agent(turns=[[call("shell", command=command)], [{"text": "ok"}]], protocol=1,
                      initialize=False)
    agent.initialize_params = PLAIN_V1_INITIALIZE
    agent.initialize()
    sid = agent.new_session(acp_workspace, mcp_servers=[])
    response, updates, _ = agent.prompt(sid, "go")
    assert stop_reason(response) == "end_turn"
    assert not {"terminal_update", "terminal_output_chunk"} & set(kinds(updates))
    shown = [u["content"][0]["content"]["text"] for u in tool_reports(updates) if u.get("content")]
    # "first" was on screen while the command still ran, before "second" existed
    assert any(text.endswith(f"$ {command}\nfirst\n```") for text in shown)
    final = [u for u in tool_reports(updates) if u.get("status") == "failed"][-1]
    assert f"$ {command}\nfirst\nsecond\n" in final["content"][0]["content"]["text"]
    assert final["content"][0]["content"]["text"].startswith("```")
    assert final["content"][1]["content"]["text"] == "exit code 3"
    assert final["rawOutput"] == {"exitCode": 3, "signal": None}
    agent.close()


@pytest.mark.skipif(shutil.which("bwrap") is None and not os.environ.get("CI"),
                    reason="bubblewrap is not installed")
def test_shell_output_streams_to_zeds_terminal(v1, acp_workspace):
    """Zed (``_meta.terminal_output``) gets its terminal: info on the first report, the
    output as deltas while the command runs, then the exit code, then the final status."""
    command = "echo first; sleep 0.5; echo second; exit 3"
    agent, sid = v1([[call("shell", command=command)], [{"text": "ok"}]])
    response, updates, _ = agent.prompt(sid, "go")
    assert stop_reason(response) == "end_turn"
    reports = tool_reports(updates)
    first = reports[0]
    call_id = first["toolCallId"]
    assert first["sessionUpdate"] == "tool_call"
    assert first["_meta"]["terminal_info"] == {"terminal_id": call_id, "cwd": acp_workspace}
    assert first["content"] == [{"type": "terminal", "terminalId": call_id}]
    metas = [u.get("_meta", {}) for u in reports]
    deltas = [m["terminal_output"]["data"] for m in metas if "terminal_output" in m]
    assert "".join(deltas) == "first\nsecond\n" and len(deltas) >= 2  # deltas, as it ran
    exit_at = next(i for i, m in enumerate(metas) if "terminal_exit" in m)
    assert metas[exit_at]["terminal_exit"] == {"terminal_id": call_id, "exit_code": 3,
                                               "signal": None}
    final = reports[-1]
    assert final["status"] == "failed" and reports.index(final) > exit_at
    assert final["content"] == [{"type": "terminal", "terminalId": call_id}]
    assert not any("```" in str(u.get("content")) for u in reports)
    agent.close()


@pytest.mark.skipif(shutil.which("bwrap") is None and not os.environ.get("CI"),
                    reason="bubblewrap is not installed")
def test_a_background_process_streams_into_zeds_terminal_until_killed(v1):
    command = "echo up; sleep 60"
    agent, sid = v1([[call("shell", command=command, background=True, wait_seconds=5)],
                     [{"text": "started"}],
                     [call("shell_kill", process_id="p1")], [{"text": "killed"}]])
    _, started, _ = agent.prompt(sid, "start it")
    first = tool_reports(started)[0]
    call_id = first["toolCallId"]
    assert first["_meta"]["terminal_info"]["terminal_id"] == call_id
    shown = "".join(u["_meta"]["terminal_output"]["data"] for u in tool_reports(started)
                    if "terminal_output" in u.get("_meta", {}))
    assert shown == "up\n"
    assert tool_reports(started)[-1]["content"] == [{"type": "terminal", "terminalId": call_id}]
    _, killed, _ = agent.prompt(sid, "kill it")
    exits = [u for u in tool_reports(killed) if "terminal_exit" in u.get("_meta", {})]
    assert exits and exits[0]["toolCallId"] == call_id  # the call that started it
    assert exits[0]["_meta"]["terminal_exit"]["terminal_id"] == call_id
    agent.close()


# ---------------------------------------------------------------- the editor's files
def test_read_file_reads_the_editors_buffer(v1, acp_workspace):
    path = os.path.join(acp_workspace, "notes.txt")
    with open(path, "w") as fh:
        fh.write("saved on disk\n")
    agent, sid = v1([[call("read_file", path="notes.txt")], [{"text": "ok"}]])
    asked = []

    def editor(message):
        if message["method"] == "fs/read_text_file":
            asked.append(message["params"])
            return {"content": "unsaved buffer text\n"}
    _, updates, _ = agent.prompt(sid, "go", on_request=editor)
    assert asked == [{"sessionId": sid, "path": path}]
    done = [u for u in tool_reports(updates) if u.get("status") == "completed"][0]
    assert "unsaved buffer text" in done["content"][0]["content"]["text"]
    agent.close()


def test_writes_go_through_the_editor_and_never_locally(v1, acp_workspace):
    path = os.path.join(acp_workspace, "made.txt")
    agent, sid = v1([[call("create_file", path="made.txt", content="hello\n")], [{"text": "ok"}]])
    written = []

    def editor(message):
        if message["method"] == "fs/write_text_file":
            written.append(message["params"])
            return {}  # the editor keeps it in a buffer: nothing lands on disk here
    _, updates, _ = agent.prompt(sid, "go", on_request=editor)
    assert written == [{"sessionId": sid, "path": path, "content": "hello\n"}]
    assert [u["status"] for u in tool_reports(updates) if u.get("status")][-1] == "completed"
    assert not os.path.exists(path)
    agent.close()


@pytest.mark.parametrize("method", ["fs/read_text_file", "fs/write_text_file"])
def test_an_editor_error_fails_the_tool_call_with_no_local_fallback(v1, acp_workspace, method):
    path = os.path.join(acp_workspace, "f.txt")
    with open(path, "w") as fh:
        fh.write("old\n")
    turn = call("read_file", path="f.txt") if method == "fs/read_text_file" else \
        call("create_file", path="f.txt", content="new\n", overwrite=True)
    agent, sid = v1([[turn], [{"text": "ok"}]])

    def editor(message):
        if message["method"] == method:
            agent.send({"jsonrpc": "2.0", "id": message["id"],
                        "error": {"code": -32603, "message": "buffer is read-only"}})
            return ANSWERED
        return agent._serve_file(message)
    _, updates, _ = agent.prompt(sid, "go", on_request=editor)
    failed = [u for u in tool_reports(updates) if u.get("status") == "failed"]
    assert failed and "buffer is read-only" in failed[-1]["content"][0]["content"]["text"]
    assert open(path).read() == "old\n"
    agent.close()


def test_outside_the_root_and_without_the_capability_io_stays_local(acp_agent, acp_workspace,
                                                                    tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("outside text\n")
    agent = acp_agent(turns=[[call("read_file", path=str(outside)),
                              call("create_file", path="local.txt", content="l\n")],
                             [{"text": "ok"}]], protocol=1, initialize=False)
    agent.initialize_params = {"protocolVersion": 1, "clientCapabilities": {"fs": {
        "readTextFile": False, "writeTextFile": False}}, "clientInfo": {"name": "x", "version": "1"}}
    agent.initialize()
    sid = agent.new_session(acp_workspace)
    _, updates, _ = agent.prompt(sid, "go", on_request=lambda m: {
        "outcome": {"outcome": "selected", "optionId": "allow-once"}}
        if m["method"] == "session/request_permission" else None)
    assert agent.fs_requests == []
    assert open(os.path.join(acp_workspace, "local.txt")).read() == "l\n"
    done = [u for u in tool_reports(updates) if u.get("status") == "completed"]
    assert "outside text" in done[0]["content"][0]["content"]["text"]
    agent.close()


def test_a_symlink_leaving_the_root_is_written_locally_after_approval(v1, acp_workspace,
                                                                      tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.symlink(outside, os.path.join(acp_workspace, "link"))
    agent, sid = v1([[call("create_file", path="link/x.txt", content="via link\n")],
                     [{"text": "ok"}]])
    asked = []
    _, updates, _ = agent.prompt(sid, "go", on_request=lambda m: asked.append(m) or {
        "outcome": {"outcome": "selected", "optionId": "allow-once"}}
        if m["method"] == "session/request_permission" else None)
    assert len(asked) == 1  # outside the root: the path policy asked first
    assert [m["method"] for m in agent.fs_requests] == []  # and the editor never wrote it
    assert (outside / "x.txt").read_text() == "via link\n"
    agent.close()


# ---------------------------------------------------------------- MCP servers
def test_mcp_servers_that_cannot_start_are_told_once(v1, acp_workspace):
    # Connected for real in tests/e2e/test_mcp.py; here both fail and the user hears it once.
    servers = [{"name": "github", "command": "/usr/bin/gh-mcp", "args": [], "env": []},
               {"type": "http", "name": "docs", "url": "http://127.0.0.1:9/mcp", "headers": []}]
    agent, sid = v1([[{"text": "one"}], [{"text": "two"}]], mcp_servers=servers)
    _, first, _ = agent.prompt(sid, "one")
    _, second, _ = agent.prompt(sid, "two")
    notice = texts(first)
    assert "'github' could not be started" in notice and "'docs' could not be started" in notice
    assert notice.endswith("one") and texts(second) == "two"
    agent.close()


# ---------------------------------------------------------------- load, list, resume, close
def test_load_in_a_second_process_replays_the_history_before_answering(acp_agent, acp_workspace,
                                                                       tmp_path):
    (tmp_path / "n.txt").write_text("n\n")
    turns = [[{"thought": "Looking."}, {"text": "Reading."},
              call("read_file", path=str(tmp_path / "n.txt"))],
             [{"text": "Done."}], [{"text": "Again."}]]
    first = acp_agent(turns=turns, protocol=1)
    sid = first.new_session(acp_workspace)
    first.prompt(sid, "Read the note", on_request=lambda m: {
        "outcome": {"outcome": "selected", "optionId": "allow-once"}})
    assert first.close() == 0

    second = acp_agent(turns=turns, protocol=1)
    listed = second.request("session/list", {"cwd": acp_workspace})["result"]["sessions"]
    assert [(s["sessionId"], s["title"]) for s in listed] == [(sid, "Read the note")]
    request_id = second.request_async("session/load", {"sessionId": sid, "cwd": acp_workspace,
                                                       "mcpServers": []})
    response = second.wait_for(lambda m: is_response(m, request_id))
    assert set(response["result"]) == {"configOptions", "modes"}  # issue 15
    replay = [m["params"]["update"] for m in second.messages if is_update(m, sid)]
    assert kinds(replay)[-1] == "available_commands_update"  # before the answer too
    replay = replay[:-1]
    assert kinds(replay) == ["user_message_chunk", "agent_thought_chunk", "agent_message_chunk",
                             "tool_call", "tool_call_update", "agent_message_chunk"]
    assert replay[0]["content"] == {"type": "text", "text": "Read the note"}
    assert texts(replay) == "Reading.Done." and texts(replay, "agent_thought_chunk") == "Looking."
    call_first, call_final = replay[3], replay[4]
    assert call_first["toolCallId"] == call_final["toolCallId"]
    assert call_first["title"] and call_first["kind"] == "read"
    assert call_final["status"] == "completed" and "n" in call_final["content"][0]["content"]["text"]
    # the loaded session continues where it left off
    response, updates, _ = second.prompt(sid, "More?")
    assert stop_reason(response) == "end_turn" and texts(updates) == "Again."
    assert second.request("session/close", {"sessionId": sid})["result"] == {}
    assert second.request("session/prompt", {"sessionId": sid, "prompt": [
        {"type": "text", "text": "x"}]})["error"]["code"] == -32002
    assert second.close() == 0


def test_resume_reattaches_without_replay(v1, acp_workspace):
    agent, sid = v1([[{"text": "one"}], [{"text": "two"}]])
    agent.prompt(sid, "first")
    assert agent.request("session/close", {"sessionId": sid})["result"] == {}
    before = len(agent.messages)
    assert set(agent.request("session/resume", {"sessionId": sid, "cwd": acp_workspace})[
        "result"]) == {"configOptions", "modes"}  # issue 15: the session's choices
    assert not [m for m in agent.messages[before:] if is_update(m)]
    response, updates, _ = agent.prompt(sid, "second")
    assert texts(updates) == "two"
    agent.close()


def test_load_errors(v1, acp_workspace, tmp_path):
    agent, sid = v1([[{"text": "x"}]])
    missing = agent.request("session/load", {"sessionId": "nope", "cwd": acp_workspace,
                                             "mcpServers": []})
    assert missing["error"]["code"] == -32002
    other = tmp_path / "other"
    other.mkdir()
    wrong = agent.request("session/load", {"sessionId": sid, "cwd": str(other), "mcpServers": []})
    assert wrong["error"]["code"] == -32602
    extra = agent.request("session/new", {"cwd": acp_workspace, "mcpServers": [],
                                          "additionalDirectories": [str(other / "gone")]})
    assert extra["error"]["code"] == -32602 and str(other / "gone") in extra["error"]["message"]
    agent.close()
