"""The exceptions that end a greenlet's work from outside: a cancelled turn, a turn that a
fail-closed approval ends, a request the client withdrew.

Each is a ``GreenletExit``, so ``except Exception`` in a tool, a plug-in or a handler
cannot swallow it; they live here, in the shared vocabulary, so that whoever kills
(the session's lifecycle, the wire's endpoint) and whoever is killed (the turn) import
them from one place without importing each other.
"""

import gevent


class TurnCancelled(gevent.GreenletExit):
    """Kills a turn greenlet (a cancel, a close, shutdown)."""


class TurnAborted(TurnCancelled):
    """A fail-closed approval path that ends the turn as cancelled: an allow read after the
    session's cancel or close, or the answer to a superseded request. A tool calling
    ``ctx.approve()`` inside ``except Exception`` cannot swallow it (``Turn._abort``)."""


class CancelledExit(gevent.GreenletExit):
    """Kills a request greenlet on ``$/cancel_request``."""
