"""The turn's way of asking about a workspace file (``core/trust.py``): outside any tool
call, so the question gets a call of its own in the editor (``trust``, with the file's path
and SHA-256 as its input and its body as content), settled once answered."""

from term2acp.core import trust
from term2acp.core.ids import new_id
from term2acp.tools.base import ToolResult
from term2acp.turns.records import CallRecord, finish, report
from term2acp.turns.records import ask as ask_about


def asker(turn):
    """``ask(request) -> choice id or None`` for :func:`core.trust.decide`, in ``turn``."""
    def ask(request):
        record = CallRecord(new_id("tc"), "trust")
        record.title, record.kind = request.title, "read"
        record.raw_input = {"path": request.path, "sha256": request.grant[2]}
        record.locations = [{"path": request.path}]
        turn.calls[record.id] = record
        report(turn, record, "pending", title=record.title, kind=record.kind,
               raw_input=record.raw_input, locations=record.locations, name="trust")
        decision = ask_about(turn, record, request)
        text = "Trusted." if decision.allowed else f"Not trusted: {decision.reason}"
        finish(turn, record, ToolResult(text, is_error=not decision.allowed))
        if decision.abort_turn:
            turn.abort(decision.reason)
        return decision.choice if decision.allowed else None
    return ask


def decide(turn, path, content, purpose=""):
    """:func:`core.trust.decide` for the turn (asking through :func:`asker`)."""
    return trust.decide(turn.session, turn.settings, path, content, asker(turn), purpose)
