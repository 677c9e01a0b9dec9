"""The turn loop with a fake session: approvals (stale, no gate, grants) and endings."""

import json
import os

import gevent
import pytest

from term2acp.core import approvals
from term2acp.core import events as ev
from term2acp.core.cancel import TurnAborted, TurnCancelled
from term2acp.turns.turn import Turn
from term2acp.providers import base as pb
from term2acp.settings import Settings
from tests.support.turnsession import FakeSession
from term2acp.tools.base import Tool, ToolResult


class Asker(Tool):
    name = "asker"
    kind = "edit"

    def approval(self, args, ctx):
        return approvals.ApprovalRequest(approvals.OUTSIDE_EDIT, path="/elsewhere/f.txt", title="Edit it")

    def run(self, args, ctx):
        return ToolResult("ran")


class Provider(pb.Provider):
    def __init__(self, turns):
        self.turns = turns

    def stream(self, request):
        index = sum(1 for m in request.messages if m["role"] == "assistant")
        yield from self.turns[index]


def make_turn(tmp_path, turns, gate=None):
    session = FakeSession(os.path.realpath(tmp_path), gate)
    turn = Turn(session, Provider(turns), {"asker": Asker()}, Settings.load(env={}), "sys")
    return session, turn


CALL = [pb.ToolCall("c1", "asker", "{}"), pb.Stop("tool_use")]
DONE = [pb.TextDelta("ok"), pb.Stop("end_turn")]


class Gate:
    def __init__(self, decide):
        self.decide = decide


def talk(session):
    """The conversation without the context notes (turns/notes.py) put before a prompt."""
    return [m for m in session.history if "notes" not in m]


def statuses(session):
    return [e.status for e in session.events if isinstance(e, ev.ToolCallReported) and e.status]


def test_turn_without_a_gate_denies(tmp_path):
    session, turn = make_turn(tmp_path, [CALL, DONE])
    assert turn.run("go") == "end_turn"
    assert statuses(session) == ["pending", "failed"]
    assert talk(session)[2]["is_error"] and approvals.NOT_SUPPORTED in talk(session)[2]["content"]


def test_turn_an_allow_after_the_session_closed_aborts_the_turn(tmp_path):
    def decide(interaction):
        session.lifecycle.close()  # the session moved on (closed) meanwhile
        return approvals.Decision(True, "allow-once")
    session, turn = make_turn(tmp_path, [CALL, DONE], Gate(decide))
    with pytest.raises(TurnAborted):
        turn.run("go")
    assert statuses(session)[-1] == "failed"
    turn.close_open_calls("cancelled")
    assert session.history[-1]["role"] == "tool"  # the model still gets a result for its call


def test_turn_allow_always_records_a_grant_and_states_bracket_the_request(tmp_path):
    session, turn = make_turn(tmp_path, [CALL, DONE],
                              Gate(lambda i: approvals.Decision(True, "allow-edit-folder-session")))
    assert turn.run("go") == "end_turn"
    assert session.access.can_edit("/elsewhere/other.txt")
    states = [e.state for e in session.events if isinstance(e, ev.StateChanged)]
    assert states == ["requires_action", "running"]
    assert statuses(session) == ["pending", "in_progress", "completed"]


def test_turn_cancel_while_waiting_for_approval_closes_the_call(tmp_path):
    from gevent.event import Event

    session, turn = make_turn(tmp_path, [CALL, DONE], Gate(lambda i: Event().wait()))
    g = gevent.spawn(turn.run, "go")
    gevent.sleep(0.01)
    g.kill(TurnCancelled, block=True, timeout=2)
    turn.close_open_calls("cancelled")
    assert statuses(session)[-1] == "cancelled"
    assert session.history[-1] == {"role": "tool", "tool_call_id": "c1", "name": "asker",
                                   "is_error": True, "content": "Not run: the turn ended (cancelled)."}


def test_turn_an_allow_after_cancel_or_close_is_a_denial(tmp_path):
    """session/cancel or session/close marks the session in the reader; an allow that the
    gate returns afterwards (read in the same chunk) must not run the tool or grant."""
    def decide(interaction):
        session.lifecycle.cancel()  # what session/cancel does, in the reader
        return approvals.Decision(True, "allow-edit-folder-session")
    session, turn = make_turn(tmp_path, [CALL, DONE], Gate(decide))
    with pytest.raises(TurnAborted):
        turn.run("go")
    assert statuses(session) == ["pending", "failed"]
    assert not session.access.can_edit("/elsewhere/other.txt")


def test_turn_a_cancel_while_reporting_in_progress_stops_before_the_tool_runs(tmp_path):
    ran = []

    class Runner(Asker):
        def approval(self, args, ctx):
            return None

        def run(self, args, ctx):
            ran.append(args)
            return ToolResult("ran")
    session, turn = make_turn(tmp_path, [CALL, DONE])
    turn.tools = {"asker": Runner()}
    original = session.emit

    def emit(event):
        original(event)
        if isinstance(event, ev.ToolCallReported) and event.status == "in_progress":
            session.lifecycle.cancel()  # the emit waited for room; a cancel was read meanwhile
    session.emit = emit
    with pytest.raises(TurnAborted):
        turn.run("go")
    assert ran == [] and statuses(session)[-1] == "cancelled"  # it never ran


def test_turn_tool_arguments_nesting_too_deep_fail_without_being_stored(tmp_path):
    deep = '{"x":' * 100 + "1" + "}" * 100
    session, turn = make_turn(tmp_path, [[pb.ToolCall("c1", "asker", deep), pb.Stop("tool_use")],
                                         DONE])
    assert turn.run("go") == "end_turn"
    assert statuses(session) == ["pending", "failed"]
    assert all(e.raw_input is None for e in session.events if isinstance(e, ev.ToolCallReported))
    assert "deeper than 64 levels" in talk(session)[2]["content"]


def test_turn_a_plugin_calling_ctx_approve_cannot_swallow_an_abort(tmp_path):
    """A denial that must end the turn (here the gate says so) is a GreenletExit: a plug-in
    that wraps ``ctx.approve()`` in ``except Exception`` neither sees nor stops it."""
    from term2acp.tools.plugins import function_tool

    seen = []

    @function_tool(name="asker", kind="edit")
    def careless(args, ctx):
        try:
            seen.append(ctx.approve(approvals.ApprovalRequest(title="Really?")))
        except Exception as exc:  # noqa: BLE001 - what a careless plug-in does
            seen.append(exc)
            return "swallowed"
        return "ran anyway"

    session, turn = make_turn(tmp_path, [CALL, DONE], Gate(
        lambda i: approvals.Decision.deny(approvals.CANCELLED, abort_turn=True)))
    turn.tools = {"asker": careless}
    with pytest.raises(TurnAborted):
        turn.run("go")
    assert seen == []
    turn.close_open_calls("cancelled")
    assert statuses(session) == ["pending", "in_progress", "cancelled"]
    assert session.history[-1]["content"] == "Not run: the turn ended (cancelled)."


def test_turn_an_abort_found_in_a_tools_helper_greenlet_ends_the_turn(tmp_path):
    """run_code answers nested calls in a greenlet of its own: an abort found there still
    ends the turn (the turn greenlet gets it too), whatever the helper does with it."""
    class Helper(Tool):
        name = "asker"

        def run(self, args, ctx):
            helper = gevent.spawn(ctx.approve, approvals.ApprovalRequest(title="Really?"))
            helper.join()
            gevent.sleep(5)  # the abort arrives here
            return ToolResult("ran anyway")

    _, turn = make_turn(tmp_path, [CALL, DONE], Gate(
        lambda i: approvals.Decision.deny(approvals.CANCELLED, abort_turn=True)))
    turn.tools = {"asker": Helper()}
    greenlet = gevent.spawn(turn.run, "go")
    greenlet.join(timeout=2)
    assert greenlet.dead and isinstance(greenlet.value, TurnAborted)


def test_turn_an_approved_edit_resolves_reads_and_diffs_once(tmp_path, monkeypatch):
    """One record, one plan: the reported location, the request's diff and the result come
    from one resolution, one read and one diff; run() re-checks the target once."""
    from term2acp.tools import edit, files, paths
    from term2acp.tools.edit import EditFileTool

    (tmp_path / "work").mkdir()
    (tmp_path / "out").mkdir()
    target = os.path.join(os.path.realpath(tmp_path / "out"), "f.txt")
    with open(target, "w") as fh:
        fh.write("old text\n")
    counts = {}

    def counting(module, name):
        real = getattr(module, name)

        def counted(*args, **kwargs):
            counts[name] = counts.get(name, 0) + 1
            return real(*args, **kwargs)
        monkeypatch.setattr(module, name, counted)
    counting(paths, "resolve")  # every path resolution
    counting(files, "open_checked")  # every open of the file to read it
    counting(edit, "diff_item")
    asked = []
    arguments = json.dumps({"path": target, "edits": [{"old_text": "old", "new_text": "new"}]})
    session = FakeSession(os.path.realpath(tmp_path / "work"),
                          Gate(lambda i: asked.append(i) or approvals.Decision(True, "allow-once")))
    turn = Turn(session, Provider([[pb.ToolCall("c1", "edit_file", arguments),
                                    pb.Stop("tool_use")], DONE]),
                {"edit_file": EditFileTool()}, Settings.load(env={}), "sys")
    assert turn.run("go") == "end_turn"
    assert counts == {"resolve": 2, "open_checked": 1, "diff_item": 1}
    with open(target) as fh:
        assert fh.read() == "new text\n"
    reported = [e for e in session.events if isinstance(e, ev.ToolCallReported)]
    assert [e.status for e in reported] == ["pending", "in_progress", "completed"]
    assert reported[0].locations == asked[0].locations == [{"path": target}]
    assert reported[-1].content == asked[0].content  # the diff the user saw is the result
    assert turn.calls == {}


class Noter(Tool):
    """A read-only tool that notes whether a bystander greenlet has run before it."""

    name = "noter"
    kind = "read"

    def __init__(self, ran, seen):
        self.ran, self.seen = ran, seen

    def approval(self, args, ctx):
        return None

    def run(self, args, ctx):
        self.seen.append(bool(self.ran))
        if len(self.seen) == 1:  # the first call readies a bystander (e.g. the reader)
            gevent.spawn(self.ran.append, 1)
        return ToolResult("noted")


def test_several_calls_of_one_round_let_the_hub_in_between_them(tmp_path):
    """A round's tool calls run back to back in the turn's greenlet; the hub polls between
    them, so a request read meanwhile is not held up behind all of them (issue 16: three
    256 KiB reads in one round held a probe ~30 ms)."""
    ran, seen = [], []
    session = FakeSession(os.path.realpath(tmp_path))
    calls = [pb.ToolCall("c1", "noter", "{}"), pb.ToolCall("c2", "noter", "{}"),
             pb.Stop("tool_use")]
    turn = Turn(session, Provider([calls, DONE]), {"noter": Noter(ran, seen)},
                Settings.load(env={}), "sys")
    assert turn.run("go") == "end_turn"
    assert seen == [False, True]
