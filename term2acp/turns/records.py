"""A tool call's record and what the turn does with it: :class:`CallRecord` holds one
call's facts, kept once (``turns/turn.py``'s docstring says who reads them);
:func:`report` sends its updates, :func:`finish` settles it, :func:`ask` puts its
question to the user (one at a time in a turn, ``turn.asking``). Used by the calls
(``turns/calls.py``) and by the turn's other askers (``turns/trusting.py``,
``turns/websearch.py``)."""

from dataclasses import dataclass, field
from typing import Any

from term2acp.core import approvals
from term2acp.core import events as ev
from term2acp.core.commandline import shown_prefix
from term2acp.tools.base import ToolResult

RESULT_DISPLAY_CAP = 16_000

TERMINAL = ("completed", "failed", "cancelled")


@dataclass
class CallRecord:
    """One tool call's facts, kept once (``turns/turn.py``'s docstring)."""

    id: str  # our tool call id, the editor's toolCallId
    name: str
    arguments: Any = None  # as the model sent them: a JSON text or an object
    model_id: str | None = None  # the provider's id of a model call; None: a nested call
    raw_input: Any = None  # the arguments as loaded from JSON
    title: str = ""
    kind: str = "other"
    locations: list = field(default_factory=list)
    status: str | None = None  # None until reported; pending, in_progress, then TERMINAL
    content: list | None = None  # the display items it ended with
    answered: bool = False  # its result is in the model's history (model calls)
    result: Any = None  # its settled ToolResult, once it has one
    quiet: dict | None = None  # a quiet tool's held report fields; None: reported as it goes

    @property
    def open(self):
        """Reported to the editor without a terminal status yet."""
        return self.status is not None and self.status not in TERMINAL

    @property
    def unanswered(self):
        """A model call whose result is not in the history yet."""
        return self.model_id is not None and not self.answered


def report(turn, record, status, **fields):
    """Report ``record`` of ``turn`` with ``status`` (a quiet tool: only a failure)."""
    record.status = status
    if record.quiet is not None:  # shown by its own updates (the plan): only a failure
        record.quiet.update((k, v) for k, v in fields.items() if v is not None)
        if status != "failed":
            return
        held, record.quiet = record.quiet, None
        pending = {k: held[k] for k in ("title", "kind", "raw_input", "locations", "name")
                   if k in held}
        turn.session.emit(ev.ToolCallReported(record.id, status="pending", **pending))
    turn.session.emit(ev.ToolCallReported(record.id, status=status, **fields))


def fail(turn, record, title, raw, message, kind="other"):
    """Report a call that failed before it could be checked; its ToolResult."""
    record.title, record.raw_input, record.kind = title, raw, kind
    report(turn, record, "pending", title=title, kind=kind, raw_input=raw, name=title)
    return finish(turn, record, ToolResult(message, is_error=True))


def finish(turn, record, result):
    """Settle ``record`` with ``result`` (reported completed or failed); returns it."""
    content = result.content or [{"type": "text", "text": result.text[:RESULT_DISPLAY_CAP]}]
    record.content, record.result = content, result
    if result.locations is not None:
        record.locations = result.locations
    report(turn, record, "failed" if result.is_error else "completed", content=content,
           raw_output=result.raw_output, locations=result.locations)
    if record.model_id is None:  # a nested call is settled now; a model call once answered
        turn.calls.pop(record.id, None)
    return result


# ---------------------------------------------------------------- approvals
def ask(turn, record, request, nested=False):
    """The decision on ``request`` for the call ``record`` of ``turn``. ``nested``: asked
    from inside the running tool (``ctx.approve``); the interaction then shows the request
    alone. Calls running side by side ask one at a time (``turn.asking``)."""
    with turn.asking:
        return _ask(turn, record, request, nested)


def _ask(turn, record, request, nested):
    session = turn.session
    session.interaction_seq += 1
    interaction = approvals.Interaction(
        id=f"int_{session.interaction_seq}", variant=request.variant,
        call_id=record.id, tool_name="" if nested else record.name,
        title=request.title or ("" if nested else record.title),
        kind="other" if nested else record.kind,
        raw_input=None if nested else record.raw_input,
        locations=[] if nested else record.locations,
        content=request.content, path=request.path,
        prefix=shown_prefix(request.prefix), offered=request.choices,
        parent=turn.parent_call)
    lifecycle = session.lifecycle  # sessions/lifecycle.py: running <-> requires_action
    lifecycle.require_action(interaction)
    gate = lifecycle.gate
    decision = gate.decide(interaction) if gate else \
        approvals.Decision.deny(approvals.NOT_SUPPORTED)
    # After session/cancel or session/close is read nothing may resolve to allow, in
    # whatever order the answer and the cancel were read: both mark the lifecycle
    # synchronously in the reader, and resume() runs after the gate returned and after
    # the last point where this greenlet could yield before the grant.
    if not lifecycle.resume(interaction) and decision.allowed:
        decision = approvals.Decision.deny(approvals.CANCELLED, abort_turn=True)
    if decision.allowed:
        session.access.grant(decision.choice, request)
    _record_question(session, record, interaction, decision)
    return decision


def _record_question(session, record, interaction, decision):
    """The question and its answer, for export (sessions/recording.py)."""
    recording = session.recording
    if recording is None:
        return
    kinds = {cid: kind for cid, _label, kind in interaction.choices}
    recording.permission(session.prompt_message_id, {
        "call_id": record.id, "model_call_id": record.model_id, "tool": record.name,
        "title": interaction.title, "input": interaction.raw_input, "path": interaction.path,
        "options": [{"optionId": cid, "name": label, "kind": kind}
                    for cid, label, kind in interaction.choices],
        "decision": {"allowed": decision.allowed, "optionId": decision.choice,
                     "kind": kinds.get(decision.choice), "reason": decision.reason}})
