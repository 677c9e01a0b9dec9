"""Issue 23: a full disk or a store another process keeps locked is told as it is, and the
next prompt once the store works again succeeds (it used to fail again, for the old loss)."""

import sqlite3

import pytest

from tests.support.storefail import refusing_inserts


def agent_message(updates):
    return "".join(u["content"]["text"] for u in updates
                   if u["sessionUpdate"] == "agent_message_chunk")


@pytest.fixture
def store_agent(started, home, tmp_path):
    (tmp_path / "config.toml").write_text("store_busy_timeout = 0.5\n")
    agent, sid = started([[{"text": "one"}], [{"text": "two"}], [{"text": "three"}]])
    _, _, idle = agent.prompt(sid, "first")
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    return agent, sid, str(home / "sessions.sqlite3")


def test_a_full_disk_says_so_and_the_next_prompt_recovers(store_agent):
    agent, sid, path = store_agent
    db = refusing_inserts(path, "history")
    _, updates, idle = agent.prompt(sid, "second", timeout=30)
    update = idle["params"]["update"]
    assert update["stopReason"] == "_term2_error"
    assert "internal error" not in update["_meta"]["term2"]["error"]
    told = agent_message(updates)
    assert "The session store could not save this turn" in told and "is full" in told
    assert "Free some space" in told
    db.execute("DROP TRIGGER no_room")
    db.close()
    _, updates, idle = agent.prompt(sid, "third", timeout=30)
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    agent.close()


def test_a_store_locked_by_another_process_says_so_and_the_next_prompt_recovers(store_agent):
    agent, sid, path = store_agent
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another term2-acp process in a long write
    _, updates, idle = agent.prompt(sid, "second", timeout=30)
    assert idle["params"]["update"]["stopReason"] == "_term2_error"
    told = agent_message(updates)
    assert "another term2-acp process kept it locked" in told
    other.execute("ROLLBACK")
    other.close()
    _, updates, idle = agent.prompt(sid, "third", timeout=30)
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    agent.close()


def test_session_list_answers_while_a_write_waits_for_another_processs_lock(started, home,
                                                                            tmp_path):
    (tmp_path / "config.toml").write_text("store_busy_timeout = 30\n")
    agent, sid = started([[{"text": "one"}], [{"text": "two"}]])
    _, _, idle = agent.prompt(sid, "first")
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    other = sqlite3.connect(str(home / "sessions.sqlite3"), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another term2-acp process in a long write
    try:
        agent.prompt_async(sid, "second")  # its updates wait until they are stored
        listed = agent.request("session/list", {}, timeout=10)  # not after the 30 s
        assert [s["sessionId"] for s in listed["result"]["sessions"]] == [sid]
    finally:
        other.execute("ROLLBACK")
        other.close()
    idle = agent.wait_update(state="idle", session_id=sid, timeout=30)
    assert idle["stopReason"] == "end_turn"
    agent.close()
