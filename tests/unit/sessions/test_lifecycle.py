"""The prompt state machine (sessions/lifecycle.py): transitions, the updates they emit,
the one cancel decision and the stale-answer rule."""

import gevent
import pytest
from gevent.event import Event

from term2acp.core.cancel import TurnCancelled
from term2acp.core import events as ev
from term2acp.sessions import lifecycle as lc
from term2acp.sessions.errors import SessionBusy, SessionNotFound


class Recorder:
    def __init__(self):
        self.events = []

    def __call__(self, event):
        self.events.append(event)

    @property
    def states(self):
        return [e.state for e in self.events if isinstance(e, ev.StateChanged)]


@pytest.fixture
def machine():
    sink = Recorder()
    return lc.Lifecycle("s1", sink), sink


def _run(machine, body):
    """start() a turn greenlet that begins, runs ``body`` and finishes like the manager's."""
    def turn():
        outcome = lc.Outcome(lc.CANCELLED)
        try:
            if machine.begin():
                outcome = body()
        finally:
            machine.finish(outcome)
    return machine.start(lambda: gevent.spawn(turn), gate=None)


def test_a_turn_emits_running_then_idle_with_its_outcome(machine):
    machine, sink = machine
    machine.admit()
    assert machine.state == lc.PREPARING and machine.busy and sink.states == []
    ended = _run(machine, lambda: lc.Outcome("end_turn", usage={"input": 1, "output": 2}))
    assert ended.get(timeout=5) == lc.Outcome("end_turn", usage={"input": 1, "output": 2})
    assert sink.states == ["running", "idle"]
    assert sink.events[-1].outcome.reason == "end_turn"
    assert machine.state == lc.IDLE and not machine.busy and machine.greenlet is None


def test_admit_refuses_a_busy_or_closed_session(machine):
    machine, _sink = machine
    machine.admit()
    with pytest.raises(SessionBusy):
        machine.admit()
    machine.abandon()  # a refused prompt (bad content, no provider) frees the slot
    machine.admit()
    machine.abandon()
    machine.close()
    with pytest.raises(SessionNotFound):
        machine.admit()


def test_a_prompt_cancelled_before_it_began_only_ends_cancelled(machine):
    machine, sink = machine
    machine.admit(cancelled=True)  # the cancel arrived in the same write as the prompt
    ran = []
    ended = _run(machine, lambda: ran.append(1) or lc.Outcome("end_turn"))
    assert ended.get(timeout=5).reason == "cancelled"
    assert ran == [] and sink.states == ["idle"]  # no running update for it


def test_cancel_kills_a_turn_that_began_and_it_still_ends_idle(machine):
    machine, sink = machine
    machine.admit()
    waiting = Event()

    def body():
        waiting.set()
        Event().wait()
    ended = _run(machine, body)
    waiting.wait(5)
    machine.cancel()
    assert machine.stopping
    assert ended.get(timeout=5).reason == "cancelled"
    assert sink.states == ["running", "idle"]
    assert machine.dropped(machine.seq)  # its queued chunks may be dropped


def test_a_turn_killed_before_it_began_still_ends_its_prompt(machine):
    machine, _sink = machine
    machine.admit()
    ended = machine.start(lambda: gevent.spawn(gevent.sleep, 5), gate=None)
    machine.greenlet.kill(TurnCancelled, block=True)  # a group kill (close, shutdown)
    assert ended.get(timeout=5).reason == "cancelled"
    assert machine.state == lc.IDLE and machine.greenlet is None


def test_requires_action_brackets_the_question(machine):
    machine, sink = machine
    machine.admit()
    machine.state = lc.RUNNING  # as after start(), without a greenlet
    asked = object()
    machine.require_action(asked)
    assert machine.state == lc.REQUIRES_ACTION and machine.interaction is asked
    assert machine.resume(asked) is True
    assert machine.state == lc.RUNNING and machine.interaction is None
    assert sink.states == ["requires_action", "running"]


def test_an_answer_to_a_superseded_or_cancelled_question_does_not_count(machine):
    machine, _sink = machine
    machine.admit()
    machine.state = lc.RUNNING
    first = object()
    machine.require_action(first)
    machine.close()  # the session was closed while the question was open
    assert machine.resume(first) is False
    other = lc.Lifecycle("s2", Recorder())
    other.admit()
    other.state = lc.RUNNING
    question = object()
    other.require_action(question)
    other.cancel()  # session/cancel read before the answer
    assert other.resume(question) is False


def test_cancel_when_idle_changes_nothing(machine):
    machine, sink = machine
    machine.cancel()
    assert not machine.stopping and machine.cancelled_seq == 0 and sink.events == []
    machine.admit()
    assert not machine.stopping  # a later prompt is not cancelled by an earlier cancel
