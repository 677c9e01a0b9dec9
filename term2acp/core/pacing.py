"""Letting the hub breathe from a busy loop: yield so that I/O is polled too.

``gevent.sleep(0)`` only queues the greenlet behind the loop's callbacks. When greenlets
keep yielding that way (a model stream that yields every few milliseconds, the writer it
wakes), gevent runs a batch of callbacks before it looks at the clock and polls for I/O,
so stdin could stay unread long enough for a session/list or a session/cancel to wait
visibly while a fast answer streamed. A timer, however
short, makes the loop go through a whole iteration, I/O included.

When to breathe: :func:`overdue` says when the hub has run ``SLICE`` seconds since it last
polled for I/O, whoever ran. A loop that breathes after so many steps of its own holds the
hub that long each time; twenty of them (twenty sessions streaming) then hold it twenty
times as long between two polls, and a request waits for all of them. Measured from the
last poll, twenty busy loops together hold it about one slice (and one step each).

Work that holds the hub in one piece and comes in bursts (a process launch: ``sh`` waits
for the child's exec with the hub held, 5-15 ms; a session's MCP servers and their
keeper, parallel tool calls start several at once) goes through :func:`spaced`: one at
a time, each once the hub has been free at least as long as the one before held it.
"""

import contextlib
import time
import weakref

import gevent
from gevent.lock import Semaphore

POLL = 1e-6  # seconds: any timer makes the event loop poll for I/O before it fires
SLICE = 0.002  # seconds of work (every greenlet's) between two polls for I/O
SPACE_MAX = 0.05  # seconds: the longest pause :func:`spaced` makes

_polled = [0.0]  # when the hub last polled (its check watcher, which runs right after)
_watched = weakref.WeakKeyDictionary()  # hub -> its check watcher


def breathe():
    """Yield to the hub and let it poll for I/O (stdin, sockets, pipes) before resuming."""
    gevent.sleep(POLL)


def overdue(slice=SLICE):
    """True once ``slice`` seconds have passed since the hub last polled for I/O: the
    caller should :func:`breathe` now."""
    hub = gevent.get_hub()
    if hub not in _watched:
        watcher = _watched[hub] = hub.loop.check(ref=False)
        watcher.start(_polled_now)
        _polled_now()  # (first use: from now on)
    return time.monotonic() - _polled[0] >= slice


def _polled_now():
    _polled[0] = time.monotonic()


_one_at_a_time = Semaphore()
_free_until = [0.0]  # time.monotonic() before which the next spaced section does not start


@contextlib.contextmanager
def spaced():
    """A section that holds the hub in one piece: one at a time, each after the hub has
    been free at least as long as the section before it held it (at most ``SPACE_MAX``),
    and after a poll for I/O when the hub is overdue."""
    with _one_at_a_time:
        pause = _free_until[0] - time.monotonic()
        if pause > 0:
            gevent.sleep(min(pause, SPACE_MAX))
        elif overdue():  # not on top of what ran since the last poll
            breathe()
        began = time.monotonic()
        try:
            yield
        finally:
            ended = time.monotonic()
            _free_until[0] = ended + (ended - began)
