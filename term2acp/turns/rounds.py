"""The tool calls of one model round, side by side where nobody has to be asked.

A model that sends several calls in one round says they do not depend on each other, so
waiting for one before starting the next only adds their times. The turn greenlet prepares
each call in the model's order (loaded, checked, reported ``pending``: the editor sees them
in that order). A call that needs nobody starts at once in a worker greenlet, at most
``limit`` at a time (``max_parallel_tools``; 1 runs them one after another, as before). A
call that asks waits for its answer in the turn greenlet, in the model's order, one
question at a time (``Turn.asking`` also holds back a question a running tool asks), while
the workers already started keep running; once allowed it runs in a worker too.

A call that changes files through the file tools (kind ``edit``, ``delete`` or ``move``)
runs alone: it starts once every earlier call has ended, and later calls start once it
has. A model may put a read, an edit of the same file and another read in one round, or a
command that writes a file and an edit of it, and means them in that order.

The results go into the model's history in the model's order, each as soon as every
earlier one is in, so a cancel finds a consistent history. Each call's updates come from
the one greenlet that runs it, so they stay in order for that call. A cancel (or any
error) kills the workers before the turn unwinds, each with a ``GreenletExit`` that kills
its command's process group on the way out; ``Turn.close_open_calls`` then settles
whatever they left open.

Each call's facts are one :class:`CallRecord` (the turn keeps them; its module docstring
says who reads them).
"""

from dataclasses import dataclass, field
from typing import Any

import gevent
from gevent.pool import Pool

from term2acp.core.pacing import breathe

KILL_TIMEOUT = 5.0  # seconds the workers of a cancelled round get to end (and reap)
ALONE = frozenset({"edit", "delete", "move"})  # tool kinds that run alone in a round


class RoundEnded(gevent.GreenletExit):
    """Kills the workers of a round that ends early (cancel, abort, or a failure)."""


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


@dataclass
class Ready:
    """A call checked and reported pending, not run yet (``Turn.prepare``)."""

    tool: Any
    args: dict
    ctx: Any  # tools.base.ToolContext
    plan: Any  # tools.base.Plan or None
    request: Any  # the core.approvals.ApprovalRequest still to ask, or None
    watch: Any = None  # lsp.diagnostics.Watch: the files it writes, their new errors


def run_round(turn, records, limit):
    """Run the model calls ``records`` of one round and answer each in the history."""
    if limit <= 1 or len(records) == 1:
        for index, record in enumerate(records):
            if index:  # several calls in one round: the hub polls between them (a
                breathe()  # probe waited behind three 256 KiB reads in one piece)
            turn.answer(record, turn.run_tool(record))
        return
    pool = Pool(limit)
    started = []  # (record, worker greenlet or settled ToolResult), in the model's order
    try:
        for index, record in enumerate(records):
            if index:
                breathe()
            step = turn.prepare(record)
            if isinstance(step, Ready) and step.request is not None:
                step = turn.approve_call(record, step)
            if isinstance(step, Ready):
                alone = step.tool.kind in ALONE
                if alone:
                    pool.join()  # every earlier call has ended
                worker = pool.spawn(turn.perform, record, step)  # waits for a free slot
                worker.name = f"tool-{record.id}"
                if alone:
                    worker.join()  # and no later call starts before it ends
                step = worker
            started.append((record, step))
            _answer_settled(turn, started, wait=False)
        _answer_settled(turn, started, wait=True)
    finally:
        if len(pool):
            pool.kill(RoundEnded, block=True, timeout=KILL_TIMEOUT)


def _answer_settled(turn, started, wait):
    """Answer the leading calls of ``started`` that have settled (all of them: ``wait``)."""
    while started:
        record, step = started[0]
        if isinstance(step, gevent.Greenlet):
            if not wait and not step.ready():
                return
            step = step.get()  # a worker's exception is the turn's
            if isinstance(step, BaseException):  # it ended with a GreenletExit (an abort)
                raise step
        started.pop(0)
        turn.answer(record, step)
