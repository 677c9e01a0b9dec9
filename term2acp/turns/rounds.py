"""The tool calls of one model round: one engine schedules them, side by side where
nobody has to be asked, behind a reader/writer gate.

A model that sends several calls in one round says they do not depend on each other, so
waiting for one before starting the next only adds their times. The turn greenlet prepares
each call (``turns/calls.py``'s ``ToolCall``) in the model's order (loaded, checked,
reported ``pending``: the editor sees them in that order). A call that needs nobody starts
at once in a worker greenlet, at most ``limit`` at a time (``max_parallel_tools``; with 1
they run one after another, through the same engine). A call that asks waits for its
answer in the turn greenlet, in the model's order, one question at a time
(``Turn.asking`` also holds back a question a running tool asks), while the workers
already started keep running; once allowed it runs in a worker too.

The gate: each tool declares whether it runs beside others (``Tool.beside_others``; by
default every kind but the file-changing ``edit``, ``delete`` and ``move``). A call that
does not is a writer: it starts once every earlier call has ended, and the round prepares
no later call until it has ended. A model may put a read, an edit of the same file and
another read in one round, or a command that writes a file and an edit of it, and means
them in that order.

The results go into the model's history in the model's order, each as soon as every
earlier one is in, so a cancel finds a consistent history. Each call's updates come from
the one greenlet that runs it, so they stay in order for that call. A cancel (or any
error) kills the workers before the turn unwinds, each with a ``GreenletExit`` that kills
its command's process group on the way out; ``Turn.close_open_calls`` then settles
whatever they left open.

Each call's facts are one :class:`CallRecord` (the turn keeps them; its module docstring
says who reads them).
"""

import gevent
from gevent.pool import Pool

from term2acp.core.pacing import breathe

KILL_TIMEOUT = 5.0  # seconds the workers of a cancelled round get to end (and reap)


class RoundEnded(gevent.GreenletExit):
    """Kills the workers of a round that ends early (cancel, abort, or a failure)."""


class Gate:
    """The round's reader/writer gate over its workers: calls that run beside others
    share ``limit`` slots; one that does not runs alone."""

    def __init__(self, limit):
        self.workers = Pool(max(1, limit))

    def start(self, call):
        """Start ``call`` (prepared and allowed) in a worker; returns the worker."""
        alone = not call.beside_others
        if alone:
            self.workers.join()  # every earlier call has ended
        worker = self.workers.spawn(call.perform)  # waits for a free slot
        worker.name = f"tool-{call.record.id}"
        if alone:
            worker.join()  # and no later call is prepared or started before it ends
        return worker

    def close(self):
        """End the workers still running (the round ended early)."""
        if len(self.workers):
            self.workers.kill(RoundEnded, block=True, timeout=KILL_TIMEOUT)


def run_round(turn, calls, limit):
    """Run the model calls ``calls`` (``ToolCall`` objects) of one round and answer each in the
    turn's history, in the model's order."""
    gate = Gate(limit)
    started = []  # (call, its worker greenlet or None: settled), in the model's order
    try:
        for index, call in enumerate(calls):
            if index:  # several calls in one round: the hub polls between them (a
                breathe()  # probe waited behind three 256 KiB reads in one piece)
            worker = gate.start(call) if call.prepare() and call.approve() else None
            started.append((call, worker))
            _answer_settled(turn, started, wait=False)
        _answer_settled(turn, started, wait=True)
    finally:
        gate.close()


def _answer_settled(turn, started, wait):
    """Answer the leading calls of ``started`` that have settled (all of them: ``wait``)."""
    while started:
        call, worker = started[0]
        result = call.result
        if worker is not None:
            if not wait and not worker.ready():
                return
            result = worker.get()  # a worker's exception is the turn's
            if isinstance(result, BaseException):  # it ended with a GreenletExit (an abort)
                raise result
        started.pop(0)
        turn.answer(call.record, result)
