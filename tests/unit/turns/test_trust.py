"""core/trust.py through the turn's asker (turns/trusting.py): allow always is remembered
per path and hash across sessions and agents, allow once and reject per session, a changed
file asks again, a foreign file is never asked about, anything doubtful rejects."""

import json
import os
import stat

import pytest

from term2acp.core import approvals, trust
from term2acp.core import events as ev
from term2acp.settings import Settings
from term2acp.turns import trusting
from term2acp.turns.turn import Turn
from tests.support.turnsession import FakeSession


class Gate:
    def __init__(self, *answers):
        self.answers, self.asked = list(answers), []

    def decide(self, interaction):
        self.asked.append(interaction)
        choice = self.answers.pop(0)
        if choice is None:
            return approvals.Decision.deny(approvals.CANCELLED)
        if choice == "reject":
            return approvals.Decision.deny(approvals.DENIED_BY_CLIENT)
        return approvals.Decision(True, choice)


def make(tmp_path, gate):
    session = FakeSession(os.path.realpath(tmp_path), gate)
    settings = Settings(data_dir=str(tmp_path / "data"))
    return session, Turn(session, None, {}, settings, "sys")


@pytest.fixture
def hooks(tmp_path):
    path = tmp_path / "ws" / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"hooks": {}}\n')
    return str(path)


def test_trust_asks_naming_the_file_and_its_hash_and_remembers_allow_always(tmp_path, hooks):
    gate = Gate("trust-always")
    session, turn = make(tmp_path, gate)
    body = open(hooks, "rb").read()
    assert trusting.decide(turn, hooks, body, "hooks") is True
    [asked] = gate.asked
    digest = trust.sha256(body)
    assert asked.variant == approvals.TRUST and asked.path == hooks
    assert asked.raw_input == {"path": hooks, "sha256": digest}
    shown = asked.content[0]["text"]
    assert hooks in shown and digest in shown and '{"hooks": {}}' in shown
    assert [c[2] for c in asked.choices] == ["allow_always", "allow_once", "reject_once"]
    reports = [e for e in session.events if isinstance(e, ev.ToolCallReported)]
    assert [r.status for r in reports] == ["pending", "completed"]
    remembered = tmp_path / "data" / "trust.json"
    assert stat.S_IMODE(os.stat(remembered).st_mode) == 0o600
    assert json.loads(remembered.read_text())["allowed"] == {hooks: [digest]}

    # another session, another agent (a fresh cache): not asked
    trust._remembered.clear()
    gate2 = Gate()
    _, turn2 = make(tmp_path, gate2)
    assert trusting.decide(turn2, hooks, body, "hooks") is True and gate2.asked == []

    # an edit asks again
    gate3 = Gate("reject")
    session3, turn3 = make(tmp_path, gate3)
    assert trusting.decide(turn3, hooks, body + b" ", "hooks") is False
    assert len(gate3.asked) == 1
    reports = [e for e in session3.events if isinstance(e, ev.ToolCallReported)]
    assert reports[-1].status == "failed"


def test_trust_once_and_reject_last_the_session_and_cancel_rejects(tmp_path, hooks):
    gate = Gate("trust-once")
    session, turn = make(tmp_path, gate)
    assert trusting.decide(turn, hooks, "A", "commands") is True
    assert trusting.decide(turn, hooks, "A", "commands") is True
    assert len(gate.asked) == 1
    assert not (tmp_path / "data" / "trust.json").exists()  # once: not remembered
    gate.answers = ["reject"]
    assert trusting.decide(turn, hooks, "B", "commands") is False
    assert trusting.decide(turn, hooks, "B", "commands") is False
    assert len(gate.asked) == 2
    gate.answers = [None]  # cancelled, disconnected, timed out: rejected
    assert trusting.decide(turn, hooks, "C", "commands") is False
    _, fresh = make(tmp_path, Gate("trust-once"))
    assert trusting.decide(fresh, hooks, "A", "commands") is True  # once was per session


def test_trust_without_a_gate_rejects(tmp_path, hooks):
    session = FakeSession(os.path.realpath(tmp_path), None)
    turn = Turn(session, None, {}, Settings(data_dir=str(tmp_path / "data")), "sys")
    assert trusting.decide(turn, hooks, "A") is False


def test_trust_a_file_another_user_owns_is_never_asked_about(tmp_path, hooks):
    if os.geteuid() != 0:
        pytest.skip("making a file another user owns needs root")
    os.chown(hooks, 54321, 54321)
    gate = Gate("trust-always")
    session, turn = make(tmp_path, gate)
    assert trusting.decide(turn, hooks, "A") is False
    assert trusting.decide(turn, hooks, "A") is False
    assert gate.asked == []
    told = [e.text for e in session.events if isinstance(e, ev.ThoughtChunk)]
    assert len(told) == 1 and hooks in told[0] and "uid 54321" in told[0]
    os.chown(hooks, 0, 0)
    os.chown(os.path.dirname(hooks), 54321, 54321)  # its folder counts too
    assert trusting.decide(turn, hooks, "A") is False and gate.asked == []


def test_trust_an_unreadable_memory_file_remembers_nothing(tmp_path, hooks):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "trust.json").write_text("{broken")
    gate = Gate("trust-always")
    _, turn = make(tmp_path, gate)
    assert trusting.decide(turn, hooks, "A") is True and len(gate.asked) == 1
    assert json.loads((tmp_path / "data" / "trust.json").read_text())["allowed"] == \
        {hooks: [trust.sha256("A")]}
