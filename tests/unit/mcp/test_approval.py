"""MCP tools inside a real turn: the first call asks (allow once / allow this tool for the
session / reject), a session grant covers later calls of that one tool only, a cancelled
turn cancels the call on the server."""

import json

import gevent

from term2acp.core import approvals
from term2acp.core import events as ev
from term2acp.core.cancel import TurnCancelled
from term2acp.turns.turn import Turn
from term2acp.mcp.adapter import grant_key
from term2acp.providers import base as pb
from term2acp.settings import Settings
from tests.support.turnsession import FakeSession
from tests.support.mcp_servers import stdio_entry


class Provider(pb.Provider):
    def __init__(self, turns):
        self.turns = turns
        self.requests = []

    def stream(self, request):
        self.requests.append(request)
        index = sum(1 for m in request.messages if m["role"] == "assistant")
        yield from self.turns[index]


class Gate:
    def __init__(self, *answers):
        self.answers, self.asked = list(answers), []

    def decide(self, interaction):
        self.asked.append(interaction)
        choice = self.answers.pop(0)
        if choice == "reject":
            return approvals.Decision.deny(approvals.DENIED_BY_CLIENT)
        return approvals.Decision(True, choice)


def call(call_id, name, **arguments):
    return [pb.ToolCall(call_id, name, json.dumps(arguments)), pb.Stop("tool_use")]


DONE = [pb.TextDelta("ok"), pb.Stop("end_turn")]


def run_turn(hub, root, turns, gate):
    assert hub.wait_ready(30)
    session = FakeSession(root, gate)
    session.context_window = 200_000  # the tool schemas alone are over the stand-in's 1,000
    provider = Provider(turns)
    turn = Turn(session, provider, hub.merged({}), Settings.load(env={}), "sys")
    return session, provider, turn


def tool_results(session):
    return [m for m in session.history if m["role"] == "tool"]


def test_first_call_asks_and_allow_tool_session_grants_that_tool_only(make_hub, root):
    hub = make_hub(stdio_entry())
    gate = Gate("allow-tool-session", "allow-once")
    turns = [call("1", "mcp__test__echo", text="a"), call("2", "mcp__test__echo", text="b"),
             call("3", "mcp__test__add", a=1, b=2), DONE]
    session, provider, turn = run_turn(hub, root, turns, gate)
    assert turn.run("go") == "end_turn"
    assert len(gate.asked) == 2  # echo once (then granted), add once
    first = gate.asked[0]
    assert first.variant == approvals.MCP_TOOL
    assert [c[0] for c in first.choices] == ["allow-once", "allow-tool-session", "reject"]
    assert first.title == "Run echo from the MCP server test"
    assert [m["content"] for m in tool_results(session)] == ["echo: a", "echo: b", "3"]
    config = hub.clients[0].config
    assert session.access.can_use_tool(grant_key(config, "echo"))
    assert not session.access.can_use_tool(grant_key(config, "add"))  # allowed once only
    names = [t["name"] for t in provider.requests[0].tools]
    assert "mcp__test__echo" in names and "mcp__test__filler_4" in names
    session.access.clear()
    assert not session.access.can_use_tool(grant_key(config, "echo"))


def test_reject_is_a_failed_call_and_nothing_runs(make_hub, root):
    hub = make_hub(stdio_entry())
    session, _, turn = run_turn(hub, root, [call("1", "mcp__test__spawn_child"), DONE], Gate("reject"))
    assert turn.run("go") == "end_turn"
    (result,) = tool_results(session)
    assert result["is_error"] and "did not allow" in result["content"]


def test_list_changed_reaches_the_next_model_request_of_the_same_turn(make_hub, root):
    # The server sends tools/list_changed before its answer, on the same pipe, so the
    # next model request of this very turn already offers the new tool.
    hub = make_hub(stdio_entry())
    turns = [call("1", "mcp__test__grow"), call("2", "mcp__test__extra"), DONE]
    session, provider, turn = run_turn(hub, root, turns, Gate("allow-once", "allow-once"))
    assert turn.run("go") == "end_turn"
    assert [m["content"] for m in tool_results(session)] == ["grown", "extra here"]
    assert "mcp__test__extra" not in [t["name"] for t in provider.requests[0].tools]
    assert "mcp__test__extra" in [t["name"] for t in provider.requests[1].tools]


def test_cancelling_the_turn_cancels_the_call_on_the_server(make_hub, root, monkeypatch):
    hub = make_hub(stdio_entry())
    session, _, turn = run_turn(hub, root, [call("1", "mcp__test__slow", seconds=60), DONE],
                                Gate("allow-once"))
    transport = hub.clients[0].transport
    sent, original = [], transport.send
    monkeypatch.setattr(transport, "send", lambda m: (sent.append(m), original(m))[1])
    greenlet = gevent.spawn(turn.run, "go")
    with gevent.Timeout(10):
        while not any(m.get("method") == "tools/call" for m in sent):
            gevent.sleep(0)  # let the turn reach the call
    greenlet.kill(TurnCancelled, block=True, timeout=5)
    assert greenlet.dead
    assert sent[-1]["method"] == "notifications/cancelled"
    turn.close_open_calls("cancelled")
    statuses = [e.status for e in session.events if isinstance(e, ev.ToolCallReported) and e.status]
    assert statuses[-1] == "cancelled"


def test_modes_read_only_refuses_unannotated_tools_and_ask_asks_every_time(make_hub, root):
    from term2acp.turns import modes

    hub = make_hub(stdio_entry())
    session, _, turn = run_turn(hub, root, [call("1", "mcp__test__echo", text="a"), DONE], Gate())
    session.mode = modes.READ_ONLY
    assert turn.run("go") == "end_turn"
    (result,) = tool_results(session)
    assert result["is_error"] and "read-only mode" in result["content"]

    gate = Gate("allow-tool-session", "approve")
    turns = [call("1", "mcp__test__echo", text="a"), call("2", "mcp__test__echo", text="b"), DONE]
    session, _, turn = run_turn(hub, root, turns, gate)
    session.mode = modes.ASK
    session.access.allow_tool(grant_key(hub.clients[0].config, "echo"))  # not consulted in ask mode
    gate.answers = ["approve", "approve"]
    assert turn.run("go") == "end_turn"
    assert len(gate.asked) == 2 and [m["content"] for m in tool_results(session)] == ["echo: a", "echo: b"]
