"""The one state machine of a session's prompts.

::

    idle -> preparing -> running <-> requires_action -> idle
      any state -> closed (for good)

Everything the rest of the runtime asks about a prompt ("is the session busy?", "was this
prompt cancelled?", "is this permission answer still wanted?") is answered here, and
every ``state_update`` the client sees is emitted by a transition of this class, so the
two cannot disagree. A turn ends with a plain :class:`Outcome` (a reason, an error text,
token usage); each protocol face turns it into its own shape (``acp/v2/translate.py``,
``acp/v1/handlers.py``).

Cancel is decided in one place, :meth:`Lifecycle.cancel`: it marks the admitted prompt
cancelled (so nothing after it may allow an approval or start a tool, and its chunks are
no longer streamed) and kills the turn greenlet once the turn has begun. A turn that had
not begun yet sees the mark in :meth:`Lifecycle.begin` and ends ``cancelled`` without
running (killing a greenlet before it starts would skip its ``finally`` and with it the
idle update).
"""

from typing import NamedTuple

from gevent.event import AsyncResult

from term2acp.core import events as ev
from term2acp.core.cancel import TurnCancelled
from term2acp.sessions.errors import SessionBusy, SessionNotFound

IDLE = "idle"
PREPARING = "preparing"
RUNNING = "running"
REQUIRES_ACTION = "requires_action"
CLOSED = "closed"

BUSY = frozenset({PREPARING, RUNNING, REQUIRES_ACTION})

# Outcome.reason: how a turn ended. ``failed`` carries ``error`` (a one-line summary).
END_TURN, CANCELLED, FAILED = "end_turn", "cancelled", "failed"


class Outcome(NamedTuple):  # not a dataclass: cheaper to import (core/record.py)
    reason: str  # end_turn | max_tokens | max_turn_requests | max_cost | refusal | cancelled
    # | failed
    error: str | None = None
    usage: dict | None = None  # tokens: input, output, thought, cached
    run: dict | None = None  # the turn's model requests and cost (exec asks: settings.report_runs)
    told: str | None = None  # failed: what it means and what to do (turns/failures.py)


class Lifecycle:
    """One session's prompt lifecycle. ``emit`` is the session's event sink."""

    def __init__(self, session_id, emit):
        self.session_id = session_id
        self._emit = emit
        self.state = IDLE
        self.seq = 0  # prompts admitted so far
        self.cancelled_seq = 0  # seq of the last prompt cancelled (or closed)
        self.greenlet = None  # the turn greenlet, from start() until the turn ends
        self.gate = None  # the approval gate of the running prompt (the face's bridge)
        self.interaction = None  # the permission request awaiting an answer
        self.ended = None  # AsyncResult of the running prompt's Outcome
        self._begun = False

    # ------------------------------------------------------------ questions
    @property
    def busy(self):
        return self.state in BUSY

    @property
    def closed(self):
        return self.state == CLOSED

    @property
    def stopping(self):
        """The current prompt was cancelled, or the session closed: nothing may start or
        be allowed any more (read in the reader's order: see :meth:`cancel`)."""
        return self.state == CLOSED or (self.cancelled_seq == self.seq and self.seq > 0
                                        and self.state != IDLE)

    def chunk_tag(self):
        """The writer's tag for a message or thought chunk of the running prompt: such
        chunks still queued when the prompt is cancelled are dropped (``dropped``). Never
        for anything else (tool-call statuses and state updates always go out), nor
        between prompts (a v1 session/load replays history as chunks)."""
        return (self, self.seq) if self.state in BUSY else None

    def dropped(self, seq):
        """Output of prompt ``seq`` may be dropped (it was cancelled, or the session closed)."""
        return self.cancelled_seq == seq or self.state == CLOSED

    # ------------------------------------------------------------ transitions
    def admit(self, cancelled=False):
        """idle -> preparing. ``cancelled``: a session/cancel was read before the prompt
        was admitted (the two arrived together); the prompt then ends ``cancelled``."""
        if self.state == CLOSED:
            raise SessionNotFound(self.session_id)
        if self.state != IDLE:
            raise SessionBusy(self.session_id)
        self.state = PREPARING
        self.seq += 1
        if cancelled:
            self.cancelled_seq = self.seq
        self.ended = AsyncResult()

    def abandon(self):
        """preparing -> idle: the prompt was refused before it ran (its error answers it)."""
        if self.state == PREPARING:
            self.state = IDLE
            self.ended = None

    def start(self, spawn, gate):
        """preparing -> running: ``spawn()`` starts the turn greenlet. The client hears
        ``running`` unless the prompt is already cancelled (it will only hear ``idle``)."""
        self.gate = gate
        self._begun = False
        self.state = RUNNING
        if not self.stopping:
            self._emit(ev.StateChanged(RUNNING))
        self.greenlet = spawn()
        self.greenlet.link(self._died)
        return self.ended

    def begin(self):
        """The turn greenlet's first step: False when the prompt was cancelled before it
        began (then the turn does nothing but :meth:`finish`)."""
        if self.stopping:
            return False
        self._begun = True
        return True

    def require_action(self, interaction):
        """running -> requires_action while ``interaction`` awaits the client's answer."""
        self.interaction = interaction
        if self.state == RUNNING:
            self.state = REQUIRES_ACTION
        self._emit(ev.StateChanged(REQUIRES_ACTION))

    def resume(self, interaction):
        """requires_action -> running. Returns True when the answer may still count: the
        interaction is still the pending one (not superseded by a close) and the prompt
        was not cancelled meanwhile."""
        current = self.interaction is interaction
        self.interaction = None
        if self.state == REQUIRES_ACTION:
            self.state = RUNNING
        self._emit(ev.StateChanged(RUNNING))
        return current and not self.stopping

    def finish(self, outcome):
        """running/requires_action -> idle with the turn's outcome (closed stays closed)."""
        ended = self.ended
        self.greenlet = None
        self.gate = None
        self.interaction = None
        if self.state != CLOSED:
            self.state = IDLE
        self._emit(ev.StateChanged(IDLE, outcome))
        if ended is not None and not ended.ready():
            ended.set(outcome)

    def cancel(self):
        """session/cancel (or close, shutdown) for the prompt admitted last: the one place
        that decides cancellation. Runs in the reader for cancel and close, so every line
        read after it sees the prompt stopping."""
        if self.state == IDLE:
            return
        self.cancelled_seq = self.seq
        if self.greenlet is not None and self._begun:
            self.greenlet.kill(TurnCancelled, block=False)

    def close(self):
        """-> closed, for good (after the turn, if any, has ended or been killed)."""
        self.cancelled_seq = self.seq
        self.state = CLOSED
        self.interaction = None

    def _died(self, greenlet):
        """A turn greenlet that died without finishing (killed before it began, or by
        shutdown) still ends its prompt: whoever waits on ``ended`` hears ``cancelled``."""
        if greenlet is not self.greenlet:
            return  # finished normally (finish() let it go)
        self.greenlet = None
        self.gate = None
        self.interaction = None
        if self.state != CLOSED:
            self.state = IDLE  # only group kills (close, shutdown) get here: nobody to tell
        ended = self.ended
        if ended is not None and not ended.ready():
            ended.set(Outcome(CANCELLED))
