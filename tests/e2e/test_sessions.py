"""Sessions over the real launcher: new, list, resume (+replay), close, locks, crashes."""

import contextlib
import os
import signal
import sqlite3

import pytest

from tests.support.scripts import write_script


def error_of(message):
    assert "error" in message, message
    return message["error"]


# ---------------------------------------------------------------- session/new
@pytest.mark.parametrize("params, message", [
    ({"cwd": "/tmp", "additionalDirectories": ["/definitely/not/here"]},
     "additionalDirectories: /definitely/not/here does not exist"),
    ({"cwd": "/tmp", "additionalDirectories": ["/etc/hostname"]},
     "additionalDirectories: /etc/hostname is not a directory"),
    ({"cwd": "/tmp", "additionalDirectories": ["rel/dir"]},
     "additionalDirectories: rel/dir is not an absolute path"),
    ({"cwd": "/tmp", "mcpServers": [{"type": "stdio", "name": "x", "command": "true"}]},
     "mcpServers[0] ('x'): command must be an absolute path"),
    ({"cwd": "relative/dir"}, "cwd must be an absolute path"),
    ({"cwd": "/definitely/not/here"}, "cwd must exist and be a directory"),
    ({"cwd": "/etc/hostname"}, "cwd must exist and be a directory"),
    ({"cwd": "/tmp/\udcff-not-utf8"}, "cwd must exist and be a directory"),
    ({"cwd": "/" + "a" * 5000}, "cwd is longer than 4096 bytes"),
    ({"cwd": "/tmp/\u0000x"}, "NUL"),
])
def test_session_new_refusals(agent, params, message):
    error = error_of(agent.request("session/new", params))
    assert error["code"] == -32602
    assert message in error["message"] or message in str(error.get("data"))
    agent.close()


def test_session_new_accepts_empty_lists_and_ids_are_unique(agent, workspace):
    ids = set()
    for extra in ({}, {"additionalDirectories": [], "mcpServers": []}):
        response = agent.request("session/new", dict({"cwd": workspace}, **extra))
        ids.add(response["result"]["sessionId"])
    assert len(ids) == 2 and all(len(i) >= 32 for i in ids)
    agent.close()


def test_session_new_canonicalizes_a_symlinked_cwd(agent, workspace, tmp_path):
    link = tmp_path / "link"
    link.symlink_to(workspace)
    sid = agent.new_session(str(link) + "/./")
    sessions = agent.request("session/list", {})["result"]["sessions"]
    assert [(s["sessionId"], s["cwd"]) for s in sessions] == [(sid, workspace)]
    agent.close()


# ---------------------------------------------------------------- session/list
def test_session_list_filters_by_canonical_cwd_and_pages(agent, workspace, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    mine = [agent.new_session(workspace) for _ in range(55)]
    agent.new_session(str(other))
    link = tmp_path / "alias"
    link.symlink_to(workspace)
    first = agent.request("session/list", {"cwd": str(link)})["result"]
    assert len(first["sessions"]) == 50 and "nextCursor" in first
    second = agent.request("session/list", {"cwd": workspace, "cursor": first["nextCursor"]})["result"]
    assert "nextCursor" not in second
    listed = [s["sessionId"] for s in first["sessions"] + second["sessions"]]
    assert listed == list(reversed(mine))  # newest first, nothing lost, nothing twice
    everything = agent.request("session/list", None)["result"]["sessions"]
    assert len(everything) == 50
    agent.close()


def test_session_list_cursor_stays_correct_while_sessions_are_added(agent, workspace):
    for _ in range(51):
        agent.new_session(workspace)
    first = agent.request("session/list", {})["result"]
    agent.new_session(workspace)  # newer than everything: must not shift the next page
    second = agent.request("session/list", {"cursor": first["nextCursor"]})["result"]
    assert len(second["sessions"]) == 1
    assert second["sessions"][0]["sessionId"] not in {s["sessionId"] for s in first["sessions"]}
    agent.close()


@pytest.mark.parametrize("cursor", ["garbage", "", "W10", 5])
def test_session_list_invalid_cursor(agent, cursor):
    assert error_of(agent.request("session/list", {"cursor": cursor}))["code"] == -32602
    agent.close()


def test_session_list_null_params_and_missing_directory(agent):
    assert agent.request("session/list", None)["result"] == {"sessions": []}
    assert agent.request("session/list", {"cwd": "/no/such/dir"})["result"] == {"sessions": []}
    error = error_of(agent.request("session/list", {"cwd": "relative"}))
    assert error["code"] == -32602 and error["message"] == "cwd must be an absolute path"
    agent.close()


# ---------------------------------------------------------------- prompts + replay
@pytest.fixture
def chatty(tmp_path):
    return write_script(tmp_path, [
        [{"thought": "Looking."}, {"text": "Hello "}, {"text": "there."}],
        [{"text": "Second answer."}],
    ])


def test_session_title_and_info_update_come_from_the_first_prompt(spawn, workspace, chatty):
    agent = spawn(script=chatty)
    agent.initialize()
    sid = agent.new_session(workspace)
    _, updates, _ = agent.prompt(sid, "  Fix   the\nflaky test  ")
    info = [u for u in updates if u["sessionUpdate"] == "session_info_update"]
    assert info[0]["title"] == "Fix the flaky test" and info[0]["updatedAt"].endswith("Z")
    listed = agent.request("session/list", {})["result"]["sessions"][0]
    assert listed["title"] == "Fix the flaky test"
    agent.close()


def replay_of(agent, sid, cwd, replay_from):
    params = {"sessionId": sid, "cwd": cwd}
    if replay_from != "absent":
        params["replayFrom"] = replay_from
    start = len(agent.messages)
    response = agent.request("session/resume", params)
    # available_commands_update follows every session start (issue 15): not history
    return response, [m["params"]["update"] for m in agent.messages[start:]
                      if m.get("method") == "session/update"
                      and m["params"]["update"]["sessionUpdate"] != "available_commands_update"]


def test_resume_replays_from_start_in_order_with_stable_ids(spawn, workspace, chatty):
    agent = spawn(script=chatty)
    agent.initialize()
    sid = agent.new_session(workspace)
    agent.prompt(sid, "first")
    agent.prompt(sid, "second")
    agent.close()

    again = spawn(script=chatty)
    again.initialize()
    response, updates = replay_of(again, sid, workspace, {"type": "start"})
    assert set(response["result"]) == {"configOptions"}  # issue 15: the session's choices
    assert again.messages[-1] is response  # every replayed update came before the response
    kinds = [(u["sessionUpdate"], u.get("content")) for u in updates]
    assert kinds == [
        ("user_message", [{"type": "text", "text": "first"}]),
        ("agent_thought", [{"type": "text", "text": "Looking."}]),
        ("agent_message", [{"type": "text", "text": "Hello there."}]),
        ("user_message", [{"type": "text", "text": "second"}]),
        ("agent_message", [{"type": "text", "text": "Second answer."}]),
    ]
    ids = [u["messageId"] for u in updates]
    assert len(set(ids)) == len(ids)
    _, twice = replay_of(again, sid, workspace, {"type": "start"})
    assert [u["messageId"] for u in twice] == ids  # stable across replays
    again.close()


@pytest.mark.parametrize("replay_from", ["absent", None])
def test_resume_without_replay_sends_nothing(spawn, workspace, chatty, replay_from):
    agent = spawn(script=chatty)
    agent.initialize()
    sid = agent.new_session(workspace)
    agent.prompt(sid, "first")
    agent.close()
    again = spawn(script=chatty)
    again.initialize()
    response, updates = replay_of(again, sid, workspace, replay_from)
    assert set(response["result"]) == {"configOptions"} and updates == []
    # and the conversation continues with its history: the script's second turn plays
    _, updates, idle = again.prompt(sid, "again")
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    assert any(u.get("content", {}).get("text") == "Second answer." for u in updates
               if u["sessionUpdate"] == "agent_message_chunk")
    again.close()


def test_resume_errors(agent, workspace, tmp_path):
    error = error_of(agent.request("session/resume", {"sessionId": "nope", "cwd": workspace}))
    assert error["code"] == -32002 and error["data"]["sessionId"] == "nope"
    sid = agent.new_session(workspace)
    other = tmp_path / "elsewhere"
    other.mkdir()
    assert error_of(agent.request("session/resume", {"sessionId": sid, "cwd": str(other)}))["code"] == -32602
    bad = {"sessionId": sid, "cwd": workspace, "replayFrom": {"type": "message", "messageId": "x"}}
    assert error_of(agent.request("session/resume", bad))["code"] == -32602
    bad = {"sessionId": sid, "cwd": workspace, "mcpServers": [{"type": "http", "name": "a", "url": "ftp://x"}]}
    assert "mcpServers[0] ('a'): url must be http(s)" in error_of(
        agent.request("session/resume", bad))["message"]
    # resuming a live session is idempotent
    for _ in range(2):
        assert "configOptions" in agent.request("session/resume", {"sessionId": sid, "cwd": workspace})["result"]
    agent.close()


# ---------------------------------------------------------------- close
@pytest.fixture
def hanging(tmp_path):
    return write_script(tmp_path, [[{"text": "partial answer"}, {"hang": True}]])


def test_close_during_a_turn_settles_cancelled_before_answering(spawn, workspace, hanging):
    agent = spawn(script=hanging)
    agent.initialize()
    sid = agent.new_session(workspace)
    agent.prompt_async(sid, "go")
    agent.wait_update("agent_message_chunk")
    response = agent.request("session/close", {"sessionId": sid})
    assert response["result"] == {}
    idle = [m for m in agent.messages if m.get("method") == "session/update"
            and m["params"]["update"].get("state") == "idle"]
    assert len(idle) == 1 and idle[0]["params"]["update"]["stopReason"] == "cancelled"
    assert agent.messages.index(idle[0]) < agent.messages.index(response)
    # closed: gone from this process's live set, still listed and resumable
    prompt = agent.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]})
    assert error_of(prompt)["code"] == -32002
    assert agent.request("session/list", {})["result"]["sessions"][0]["sessionId"] == sid
    assert agent.request("session/close", {"sessionId": sid})["result"] == {}  # idempotent
    assert agent.request("session/close", {"sessionId": "never"})["result"] == {}
    assert "configOptions" in agent.request("session/resume", {"sessionId": sid, "cwd": workspace})["result"]
    agent.close()


# ---------------------------------------------------------------- several processes
@pytest.mark.acp_process
def test_two_processes_share_the_store_and_a_resume_takes_the_session_over(spawn, workspace):
    a, b = spawn(), spawn()
    a.initialize()
    b.initialize()
    sid = a.new_session(workspace)
    assert [s["sessionId"] for s in b.request("session/list", {})["result"]["sessions"]] == [sid]
    # b's resume asks a to let it go: a's client hears why, b gets the session
    assert "configOptions" in b.request("session/resume", {"sessionId": sid, "cwd": workspace})["result"]
    told = a.wait_update("agent_message_chunk", session_id=sid)
    assert f"another term2-acp process (pid {b.proc.pid})" in told["content"]["text"]
    # a's next prompt is answered with what happened (a turn, not an error), once
    _, updates, idle = a.prompt(sid, "x")
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    assert any(f"pid {b.proc.pid}" in u["content"]["text"] for u in updates
               if u["sessionUpdate"] == "agent_message_chunk")
    # then a prompt says where the session is and what to do, as an error
    prompt = a.request("session/prompt", {"sessionId": sid,
                                           "prompt": [{"type": "text", "text": "x"}]})
    error = error_of(prompt)
    assert error["code"] == -32009 and f"pid {b.proc.pid}" in error["message"]
    assert "take it over" in error["message"]
    # and a resume in a takes it back
    assert "configOptions" in a.request("session/resume", {"sessionId": sid, "cwd": workspace})["result"]
    b.wait_update("agent_message_chunk", session_id=sid)
    a.close()
    b.close()


def test_shutdown_releases_locks(spawn, workspace):
    a = spawn()
    a.initialize()
    sid = a.new_session(workspace)
    assert a.close() == 0
    b = spawn()
    b.initialize()
    assert "configOptions" in b.request("session/resume", {"sessionId": sid, "cwd": workspace})["result"]
    b.close()


def test_kill_9_loses_nothing_that_was_reported(spawn, workspace, hanging):
    agent = spawn(script=hanging, process=True)  # killed: the agent after it resumes
    agent.initialize()
    sid = agent.new_session(workspace)
    agent.prompt_async(sid, "go")
    agent.wait_update("agent_message_chunk")
    os.kill(agent.proc.pid, signal.SIGKILL)
    agent.wait(5)

    again = spawn(script=hanging)
    again.initialize()
    assert again.request("session/list", {})["result"]["sessions"][0]["sessionId"] == sid
    _, updates = replay_of(again, sid, workspace, {"type": "start"})
    assert [(u["sessionUpdate"], u["content"][0]["text"]) for u in updates] == [
        ("user_message", "go"), ("agent_message", "partial answer")]
    again.close()


# ---------------------------------------------------------------- store faults
def test_corrupt_store_gives_a_clear_error(spawn, home, workspace):
    (home / "sessions.sqlite3").write_bytes(b"this is not a database" * 100)
    agent = spawn()
    agent.initialize()
    error = error_of(agent.request("session/new", {"cwd": workspace}))
    assert error["code"] == -32603 and "sessions.sqlite3" in error["message"]
    assert "move it aside" in error["message"]
    agent.close()


def test_read_only_data_dir_gives_a_clear_error(spawn, tmp_path, workspace):
    if os.geteuid() == 0:
        target = tmp_path / "file-not-dir"
        target.write_text("x")
        home = target / "sub"  # cannot be created even by root
    else:
        home = tmp_path / "ro"
        home.mkdir(mode=0o500)
    agent = spawn(env={"TERM2ACP_HOME": str(home)})
    agent.initialize()
    error = error_of(agent.request("session/new", {"cwd": workspace}))
    assert error["code"] == -32603 and "cannot open the session store" in error["message"]
    assert agent.request("session/list", {})["error"]["code"] == -32603
    agent.close()


def test_store_schema_is_versioned(agent, home, workspace):
    agent.new_session(workspace)
    agent.close()
    with contextlib.closing(sqlite3.connect(home / "sessions.sqlite3")) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] >= 1
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_locked_database_gives_a_clear_error(spawn, home, workspace, tmp_path):
    (tmp_path / "config.toml").write_text("store_busy_timeout = 0.3\n")  # then it fails
    agent = spawn()
    agent.initialize()
    agent.new_session(workspace)  # creates the store
    holder = sqlite3.connect(home / "sessions.sqlite3", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        error = error_of(agent.request("session/new", {"cwd": workspace}, timeout=20))
        assert error["code"] == -32603 and "locked" in error["message"]
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert "result" in agent.request("session/new", {"cwd": workspace})  # usable again
    agent.close()


def test_cwd_deleted_after_creation(spawn, workspace, tmp_path):
    import shutil

    agent = spawn(script=write_script(tmp_path, [
        [{"tool_call": {"name": "read_file", "arguments": {"path": "a.txt"}}}], [{"text": "gone"}]]))
    agent.initialize()
    sid = agent.new_session(workspace)
    shutil.rmtree(workspace)
    _, updates, idle = agent.prompt(sid, "read it")
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    assert [u.get("status") for u in updates if u["sessionUpdate"] == "tool_call_update"][-1] == "failed"
    agent.request("session/close", {"sessionId": sid})
    error = error_of(agent.request("session/resume", {"sessionId": sid, "cwd": workspace}))
    assert error["code"] == -32602 and "cwd must exist" in error["message"]
    agent.close()


@pytest.mark.parametrize("protocol", [2, 1])
def test_a_replaying_start_sends_every_update_before_its_answer(acp_agent, workspace, chatty,
                                                                 protocol):
    """session/resume with replayFrom (v2) and session/load (v1): the replay and the
    session's slash commands all come before the response, none after it."""
    agent = acp_agent(script=chatty, protocol=protocol)
    sid = agent.new_session(workspace)
    agent.prompt(sid, "first")
    agent.close()
    agent = acp_agent(script=chatty, protocol=protocol)
    method, params = ("session/load", {"mcpServers": []}) if protocol == 1 else \
        ("session/resume", {"replayFrom": {"type": "start"}})
    start = len(agent.messages)
    response = agent.request(method, dict(params, sessionId=sid, cwd=workspace))
    assert "result" in response, response
    answered = next(i for i, m in enumerate(agent.messages) if m is response)
    agent.request("session/list", {})  # what the resume sent at once after it is in by now
    kinds = [(i, m["params"]["update"]["sessionUpdate"]) for i, m in
             enumerate(agent.messages[start:], start) if m.get("method") == "session/update"]
    assert ("available_commands_update" in [k for i, k in kinds if i < answered]), kinds
    late = [k for i, k in kinds if i > answered and k != "config_option_update"]
    assert late == [], kinds
    agent.close()
