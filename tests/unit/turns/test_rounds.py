"""The calls of one model round: side by side when nobody asks, bounded, answered in the
model's order; questions one at a time in order; cancel ends every call."""

import os

import gevent
import pytest
from gevent.event import Event

from term2acp.core.cancel import TurnCancelled
from term2acp.turns.turn import Turn
from term2acp.core import approvals
from term2acp.core import events as ev
from term2acp.providers import base as pb
from term2acp.settings import Settings
from term2acp.tools.base import Tool, ToolResult
from tests.support.turnsession import FakeSession


class Waiter(Tool):
    """Runs until the test releases its name; records who ran at the same time."""

    name = "wait"
    kind = "execute"

    def __init__(self, log, gates, asks=()):
        self.log, self.gates, self.asks, self.running = log, gates, set(asks), set()

    def approval(self, args, ctx):
        if args.get("tag") in self.asks:
            return approvals.ApprovalRequest(title=f"run {args['tag']}?")
        return None

    def load(self, arguments):
        return dict(arguments)

    def run(self, args, ctx):
        tag = args["tag"]
        self.running.add(tag)
        self.log.append(("start", tag, frozenset(self.running)))
        try:
            self.gates.setdefault(tag, Event()).wait(10)
        finally:
            self.running.discard(tag)
        self.log.append(("end", tag))
        return ToolResult(f"result {tag}")


class Provider(pb.Provider):
    def __init__(self, turns):
        self.turns = turns

    def stream(self, request):
        index = sum(1 for m in request.messages if m["role"] == "assistant")
        yield from self.turns[index]


def calls(*tags):
    return [*(pb.ToolCall(f"c{t}", "wait", {"tag": t}) for t in tags), pb.Stop("tool_use")]


DONE = [pb.TextDelta("ok"), pb.Stop("end_turn")]


def make(tmp_path, tags, limit=4, asks=(), decide=None, turns=None):
    log, gates = [], {}
    settings = Settings.load(env={})
    settings.max_parallel_tools = limit
    gate = type("Gate", (), {"decide": staticmethod(decide)})() if decide else None
    session = FakeSession(os.path.realpath(tmp_path), gate)
    tool = Waiter(log, gates, asks)
    turns = turns or [calls(*tags), DONE]
    turn = Turn(session, Provider(turns), {"wait": tool}, settings, "sys")
    return session, turn, log, gates


def release_when(log, gates, predicate, tags):
    """Release ``tags`` once ``predicate(log)`` holds (bounded)."""
    with gevent.Timeout(5):
        while not predicate(log):
            gevent.sleep(0.005)
    for tag in tags:
        gates.setdefault(tag, Event()).set()


def tool_results(session):
    return [(m["tool_call_id"], m["content"]) for m in session.history if m["role"] == "tool"]


def test_round_calls_run_side_by_side_and_answer_in_the_models_order(tmp_path):
    session, turn, log, gates = make(tmp_path, "abc")
    # c finishes first, a last: the history still says a, b, c
    helper = gevent.spawn(release_when, log, gates,
                          lambda log: sum(1 for e in log if e[0] == "start") == 3, "c")
    gevent.spawn(release_when, log, gates, lambda log: ("end", "c") in log, "b")
    gevent.spawn(release_when, log, gates, lambda log: ("end", "b") in log, "a")
    assert turn.run("go") == "end_turn"
    helper.get()
    starts = [e for e in log if e[0] == "start"]
    assert starts[-1][2] == frozenset("abc")  # all three were running at once
    assert [e[1] for e in log if e[0] == "end"] == ["c", "b", "a"]
    assert tool_results(session) == [("ca", "result a"), ("cb", "result b"), ("cc", "result c")]


def test_round_runs_at_most_the_configured_number_at_once(tmp_path):
    session, turn, log, gates = make(tmp_path, "abcde", limit=2)
    for tag in "abcde":
        gates[tag] = Event()

    def release_all():
        with gevent.Timeout(5):
            for tag in "abcde":
                while ("start", tag) not in [(e[0], e[1]) for e in log]:
                    gevent.sleep(0.005)
                gates[tag].set()
    gevent.spawn(release_all)
    assert turn.run("go") == "end_turn"
    assert max(len(e[2]) for e in log if e[0] == "start") <= 2
    assert [r[0] for r in tool_results(session)] == ["ca", "cb", "cc", "cd", "ce"]


def test_round_limit_one_runs_calls_one_after_another(tmp_path):
    session, turn, log, gates = make(tmp_path, "ab", limit=1)
    for tag in "ab":
        gates[tag] = Event()
        gates[tag].set()
    assert turn.run("go") == "end_turn"
    assert [e[:2] for e in log] == [("start", "a"), ("end", "a"), ("start", "b"), ("end", "b")]


def test_round_questions_come_one_at_a_time_in_order_while_others_run(tmp_path):
    asked, running = [], []

    def decide(interaction):
        asked.append(interaction.call_id)
        running.append(set(turn.tools["wait"].running))
        gevent.sleep(0.01)
        return approvals.Decision(True, "approve")
    session, turn, log, gates = make(tmp_path, "abc", asks="bc", decide=decide)
    for tag in "abc":
        gates[tag] = Event()
    gevent.spawn(release_when, log, gates,
                 lambda log: sum(1 for e in log if e[0] == "start") == 3, "abc")
    assert turn.run("go") == "end_turn"
    records = [e.call_id for e in session.events if isinstance(e, ev.ToolCallReported)
               and e.status == "pending"]
    assert len(asked) == 2 and asked == records[1:]  # b then c, in the model's order
    assert running[0] == {"a"} and "a" in running[1]  # a ran while b and c were asked
    assert [r[0] for r in tool_results(session)] == ["ca", "cb", "cc"]


def test_round_cancel_ends_every_running_call(tmp_path):
    session, turn, log, gates = make(tmp_path, "abc")
    greenlet = gevent.spawn(turn.run, "go")
    with gevent.Timeout(5):
        while sum(1 for e in log if e[0] == "start") < 3:
            gevent.sleep(0.005)
    greenlet.kill(TurnCancelled, block=True, timeout=5)
    assert greenlet.dead
    assert not turn.tools["wait"].running  # every worker unwound
    turn.close_open_calls("cancelled")
    finals = {}
    for e in session.events:
        if isinstance(e, ev.ToolCallReported) and e.status:
            finals[e.call_id] = e.status
    assert set(finals.values()) == {"cancelled"}
    assert [m["content"] for m in session.history if m["role"] == "tool"] == \
        ["Not run: the turn ended (cancelled)."] * 3


def test_round_a_call_settled_before_a_cancel_keeps_its_result(tmp_path):
    session, turn, log, gates = make(tmp_path, "ab")
    gates["b"] = Event()
    gates["b"].set()  # b ends at once; a runs until the cancel
    greenlet = gevent.spawn(turn.run, "go")
    with gevent.Timeout(5):
        while ("end", "b") not in log:
            gevent.sleep(0.005)
    greenlet.kill(TurnCancelled, block=True, timeout=5)
    turn.close_open_calls("cancelled")
    assert tool_results(session) == [("ca", "Not run: the turn ended (cancelled)."),
                                      ("cb", "result b")]


def test_round_a_failing_worker_fails_the_turn_and_ends_the_others(tmp_path):
    session, turn, log, gates = make(tmp_path, "ab")
    original = session.emit

    def emit(event):
        if isinstance(event, ev.ToolCallReported) and event.call_id and event.status == "completed":
            raise RuntimeError("store is gone")
        original(event)
    session.emit = emit
    gates["a"] = Event()
    gates["a"].set()
    with pytest.raises(RuntimeError):
        turn.run("go")
    assert not turn.tools["wait"].running


def test_round_a_call_that_fails_early_keeps_its_place(tmp_path):
    session, turn, log, gates = make(tmp_path, "ab", turns=[
        [pb.ToolCall("ca", "wait", {"tag": "a"}), pb.ToolCall("cx", "nope", {}),
         pb.ToolCall("cb", "wait", {"tag": "b"}), pb.Stop("tool_use")], DONE])
    for tag in "ab":
        gates[tag] = Event()
        gates[tag].set()
    assert turn.run("go") == "end_turn"
    results = tool_results(session)
    assert [r[0] for r in results] == ["ca", "cx", "cb"]
    assert "Unknown tool 'nope'" in results[1][1]


def test_round_questions_asked_from_running_tools_come_one_at_a_time(tmp_path):
    """Two running calls ask from inside (ctx.approve, as run_code's nested calls do): the
    editor gets one question at a time."""
    asking, most = [0], [0]

    def decide(interaction):
        asking[0] += 1
        most[0] = max(most[0], asking[0])
        gevent.sleep(0.02)
        asking[0] -= 1
        return approvals.Decision(True, "approve")

    class Nested(Tool):
        name = "wait"
        kind = "execute"

        def load(self, arguments):
            return dict(arguments)

        def run(self, args, ctx):
            allowed = ctx.approve(approvals.ApprovalRequest(title=f"nested {args['tag']}?"))
            return ToolResult(f"{args['tag']} {allowed}")

    session, turn, _log, _gates = make(tmp_path, "abc", decide=decide)
    turn.tools = {"wait": Nested()}
    assert turn.run("go") == "end_turn"
    assert most[0] == 1
    assert tool_results(session) == [("ca", "a True"), ("cb", "b True"), ("cc", "c True")]
