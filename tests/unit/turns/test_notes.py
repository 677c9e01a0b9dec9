"""Context notes (turns/notes.py): what changed within a session reaches the model as a
message, never as a change of the system prompt."""

from term2acp.turns import notes
from tests.support.turnsession import TurnSessionStub


class Session(TurnSessionStub):
    def __init__(self, root, mode="auto"):
        super().__init__(root)
        self.mode = mode


def test_the_first_note_tells_everything_then_only_what_changed(tmp_path):
    session = Session(str(tmp_path))
    first = notes.add_pending(session)
    assert f"Workspace root: {tmp_path}" in first["content"] and "AUTO mode" in first["content"]
    assert "Today's date" in first["content"] and "AGENTS.md" not in first["content"]
    assert notes.pending(session) is None  # nothing changed
    session.mode = "read-only"
    changed = notes.add_pending(session)
    assert "READ-ONLY mode" in changed["content"] and "Workspace root" not in changed["content"]
    assert list(changed["notes"]) == ["mode"]
    (tmp_path / "AGENTS.md").write_text("RULE: tabs\n")
    rules = notes.add_pending(session)
    assert "RULE: tabs" in rules["content"] and list(rules["notes"]) == ["instructions"]
    assert session.events  # the user is told which AGENTS.md is in use
    (tmp_path / "AGENTS.md").unlink()
    assert "no longer" in notes.pending(session)["content"] or \
        "any more" in notes.pending(session)["content"]


def test_a_compacted_history_gets_the_whole_context_again(tmp_path):
    session = Session(str(tmp_path))
    notes.add_pending(session)
    session.history = [{"role": "_summary", "summary": "earlier"}]  # the notes folded away
    again = notes.pending(session)
    assert "Workspace root" in again["content"] and "AUTO mode" in again["content"]


def test_the_sandbox_state_is_a_note_so_a_restart_without_it_keeps_the_prefix(tmp_path):
    session = Session(str(tmp_path))
    session.sandbox_note = "available: writes only inside the workspace root"
    assert "Shell sandbox: available" in notes.add_pending(session)["content"]
    session.sandbox_note = "unavailable (bwrap is missing); shell calls are refused"
    changed = notes.add_pending(session, notes.WITHIN_TURN)
    assert list(changed["notes"]) == ["sandbox"] and "unavailable" in changed["content"]
