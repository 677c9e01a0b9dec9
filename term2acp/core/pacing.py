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
"""

import time
import weakref

import gevent

POLL = 1e-6  # seconds: any timer makes the event loop poll for I/O before it fires
SLICE = 0.002  # seconds of work (every greenlet's) between two polls for I/O

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
