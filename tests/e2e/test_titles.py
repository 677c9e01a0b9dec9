"""Session titles through the launcher against the fake model server, v1 and v2: the
user's words at once, the model's short title after the first turn (a session info
update, stored: it survives a restart), a hanging title request never holds the next
prompt, /rename sets one by hand."""

import pytest

from tests.e2e.test_undo import srv, text  # noqa: F401 - srv is a fixture
from tests.support import fake_llm as f

PROTOCOLS = pytest.mark.parametrize("protocol", [2, 1])


def start(acp_agent, server, protocol):
    return acp_agent(args=("--provider", "openai", "--model", "m"), protocol=protocol,
                     env={"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "sk-t-123456"})


def titles(agent, session_id):
    return [m["params"]["update"]["title"] for m in agent.messages
            if m.get("method") == "session/update" and m["params"]["sessionId"] == session_id
            and m["params"]["update"]["sessionUpdate"] == "session_info_update"
            and m["params"]["update"].get("title")]


def listed_title(agent, session_id):
    sessions = agent.request("session/list", {})["result"]["sessions"]
    return next(s.get("title") for s in sessions if s["sessionId"] == session_id)


@PROTOCOLS
def test_the_model_titles_the_session_after_its_first_turn(acp_agent, acp_workspace, srv,
                                                           protocol):
    srv.title = "\"Parser bug fix.\""
    srv.enqueue(text("Looking at the parser."), text("Second answer."))
    agent = start(acp_agent, srv, protocol)
    sid = agent.new_session(acp_workspace)
    agent.prompt(sid, "please   fix the parser\nbug in src", timeout=30)
    if "Parser bug fix" not in titles(agent, sid):  # it may come before v1's prompt answer
        agent.wait_update("session_info_update", session_id=sid, title="Parser bug fix",
                          timeout=20)
    assert titles(agent, sid) == ["please fix the parser bug in src", "Parser bug fix"]
    request = srv.title_requests[0].json
    assert "please" in request["messages"][-1]["content"] and not request.get("tools")
    assert listed_title(agent, sid) == "Parser bug fix"
    agent.prompt(sid, "more", timeout=30)
    assert len(srv.title_requests) == 1  # once, after the first turn
    agent.close()
    agent = start(acp_agent, srv, protocol)
    assert listed_title(agent, sid) == "Parser bug fix"


@PROTOCOLS
def test_a_hanging_title_request_never_holds_the_next_prompt_and_rename_wins(
        acp_agent, acp_workspace, srv, protocol):
    srv.title = stall = f.Stall()
    srv.enqueue(text("One."), text("Two."))
    agent = start(acp_agent, srv, protocol)
    sid = agent.new_session(acp_workspace)
    agent.prompt(sid, "first words", timeout=30)
    assert stall.reached.wait(10)
    agent.prompt(sid, "second", timeout=10)  # answered while the title request hangs
    _, updates, _ = agent.prompt(sid, "/rename   My own   title", timeout=10)
    assert {"sessionUpdate": "session_info_update", "title": "My own title"}.items() <= \
        next(u for u in updates if u["sessionUpdate"] == "session_info_update"
             and u.get("title")).items()
    assert listed_title(agent, sid) == "My own title"
    assert len(srv.requests) == 2  # /rename never reaches the model


CONTROLS = ("\x1b", "\x07", "\u202e", "\u2066", "\x9b", "\u200b")


@PROTOCOLS
def test_titles_carry_no_control_characters(acp_agent, acp_workspace, srv, protocol,
                                            tmp_path):
    """ESC, BEL and bidi controls in the user's words and in the model's title never reach
    a session info update nor session/list (one stored earlier is filtered on the way)."""
    srv.title = "\x1b]0;owned\x07Parser \u202efix\x9b2J"
    srv.enqueue(text("Looking."))
    agent = start(acp_agent, srv, protocol)
    sid = agent.new_session(acp_workspace)
    agent.prompt(sid, "please \x1b[2J fix \u2066the\u200b parser\x07", timeout=30)
    agent.wait_update("session_info_update", session_id=sid, title="]0;owned Parser fix 2J",
                      timeout=20)
    shown = titles(agent, sid) + [listed_title(agent, sid)]
    assert shown[0] == "please [2J fix the parser" and shown[-1] == "]0;owned Parser fix 2J"
    assert not [t for t in shown if any(c in t for c in CONTROLS)], shown
    agent.close()
    import sqlite3
    db = sqlite3.connect(str(tmp_path / "term2acp-home" / "sessions.sqlite3"))
    db.execute("UPDATE sessions SET title = ? WHERE id = ?", ("old\x1b]2;x\x07 \u202etitle", sid))
    db.commit()
    db.close()
    agent = start(acp_agent, srv, protocol)
    assert listed_title(agent, sid) == "old ]2;x title"
