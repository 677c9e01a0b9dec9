"""Fork at a message and /rewind, against the fake model server, v1 and v2: session/fork
with ``_meta.jetbrains.air.fork = {"version": 1, "messageId": ...}`` at turn 1's agent
message (its id taken before a restart) sends turn 1 only; an unknown id is -32602 naming
it and makes no session; /rewind lists the turns, /rewind 2 takes back turns 2 and 3 (files
restored as /undo does) and the next request has turn 1 only."""

import json
import os

from tests.e2e.test_fork_delete import PROTOCOLS, setup_params, start
from tests.e2e.test_undo import calls, edit, read, said, srv, text  # noqa: F401 - srv


def agent_message_id(updates):
    return next(u["messageId"] for u in updates if u["sessionUpdate"] == "agent_message_chunk")


def sent(request):
    return json.dumps(request.json["messages"])


def fork_at(agent, protocol, sid, cwd, message_id):
    return agent.request("session/fork", setup_params(
        protocol, sessionId=sid, cwd=cwd,
        _meta={"jetbrains": {"air": {"fork": {"version": 1, "messageId": message_id}}}}))


@PROTOCOLS
def test_a_fork_at_turn_ones_agent_message_sends_turn_one_only(acp_agent, acp_workspace, srv,
                                                                protocol):
    srv.enqueue(text("ANSWER-ONE"), text("ANSWER-TWO"), text("forked"))
    agent = start(acp_agent, srv, protocol)
    sid = agent.new_session(acp_workspace)
    _, updates, _ = agent.prompt(sid, "QUESTION-ONE")
    first = agent_message_id(updates)
    agent.prompt(sid, "QUESTION-TWO")
    agent.close()
    agent = start(acp_agent, srv, protocol)  # ids survive a restart
    forked = fork_at(agent, protocol, sid, acp_workspace, first)
    assert "result" in forked, forked
    fork = forked["result"]["sessionId"]
    agent.wait_update("available_commands_update", session_id=fork)
    agent.prompt(fork, "QUESTION-THREE")
    last = sent(srv.requests[-1])
    assert "QUESTION-ONE" in last and "ANSWER-ONE" in last and "QUESTION-THREE" in last
    assert "QUESTION-TWO" not in last and "ANSWER-TWO" not in last
    agent.close()


@PROTOCOLS
def test_an_unknown_fork_point_is_refused_by_name(acp_agent, acp_workspace, srv, protocol):
    srv.enqueue(text("one"))
    agent = start(acp_agent, srv, protocol)
    sid = agent.new_session(acp_workspace)
    agent.prompt(sid, "hello")
    before = agent.request("session/list", {})["result"]["sessions"]
    error = fork_at(agent, protocol, sid, acp_workspace, "msg_nope")["error"]
    assert error["code"] == -32602 and "msg_nope" in error["message"]
    bad = agent.request("session/fork", setup_params(
        protocol, sessionId=sid, cwd=acp_workspace,
        _meta={"jetbrains": {"air": {"fork": {"version": 2, "messageId": "x"}}}}))["error"]
    assert bad["code"] == -32602 and "version" in bad["message"]
    assert agent.request("session/list", {})["result"]["sessions"] == before
    agent.close()


@PROTOCOLS
def test_rewind_lists_the_turns_and_takes_back_turn_two_and_later(acp_agent, acp_workspace, srv,
                                                                  protocol):
    a, b = os.path.join(acp_workspace, "a.txt"), os.path.join(acp_workspace, "b.txt")
    srv.enqueue(calls(("create_file", {"path": "a.txt", "content": "one\n"})), text("T1-DONE"),
                calls(edit("a.txt", "one", "two")), text("T2-DONE"),
                calls(("create_file", {"path": "b.txt", "content": "b\n"})), text("T3-DONE"),
                text("after"))
    agent = start(acp_agent, srv, protocol)
    sid = agent.new_session(acp_workspace)
    for words in ("make a", "change a", "make b"):
        agent.prompt(sid, words, timeout=30)
    assert read(a) == "two\n" and read(b) == "b\n"
    listed = said(agent.prompt(sid, "/rewind")[1])
    assert "1. make a" in listed and "2. change a" in listed and "3. make b" in listed
    report = said(agent.prompt(sid, "/rewind 2", timeout=30)[1])
    assert "Removed (created by that turn): b.txt." in report
    assert "Restored: a.txt." in report
    assert read(a) == "one\n" and not os.path.exists(b)
    listed = said(agent.prompt(sid, "/rewind")[1])
    assert "1. make a" in listed and "2." not in listed
    agent.prompt(sid, "what now")
    last = sent(srv.requests[-1])
    assert "T1-DONE" in last and "T2-DONE" not in last and "T3-DONE" not in last
    assert "/rewind" not in last
    agent.close()


def test_rewind_to_a_turn_that_is_not_there(acp_agent, acp_workspace, srv):
    srv.enqueue(text("one"))
    agent = start(acp_agent, srv, 2)
    sid = agent.new_session(acp_workspace)
    agent.prompt(sid, "hello")
    assert "There is no turn 7 left to rewind." in said(agent.prompt(sid, "/rewind 7")[1])
    assert "Usage: /rewind N" in said(agent.prompt(sid, "/rewind x")[1])
    agent.close()
