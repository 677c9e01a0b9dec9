"""Letting the hub breathe from a busy loop: yield so that I/O is polled too.

``gevent.sleep(0)`` only queues the greenlet behind the loop's callbacks. When greenlets
keep yielding that way (a model stream that yields every few milliseconds, the writer it
wakes), gevent runs up to 50 callbacks before it looks at the clock and polls for I/O: a
loop yielding every 5 ms could leave stdin unread for about 250 ms, so a session/list or a
session/cancel waited that long while a fast answer streamed (issue 16). A timer, however
short, makes the loop go through a whole iteration, I/O included.
"""

import sys

import gevent

POLL = 1e-6  # seconds: any timer makes the event loop poll for I/O before it fires


def breathe():
    """Yield to the hub and let it poll for I/O (stdin, sockets, pipes) before resuming."""
    gevent.sleep(POLL)


# ---------------------------------------------------------------- the GIL hand-over period
# Native threads that work for the hub (the session store) ask for a short switch
# interval while they run, so the hub and they take turns quickly. The interval is
# process-wide: requests are counted here (on the hub), the shortest one wins, and the
# interval the process had goes back once none is left, whatever order they end in.
_held = []  # the intervals asked for, one entry per holder
_base = None  # the interval before the first request


def shorten_switch_interval(seconds):
    """Ask for a switch interval of at most ``seconds`` until :func:`restore_switch_interval`
    is called with the same value."""
    global _base
    if not _held:
        _base = sys.getswitchinterval()
    _held.append(seconds)
    sys.setswitchinterval(min(_base, *_held))


def restore_switch_interval(seconds):
    _held.remove(seconds)
    sys.setswitchinterval(min(_base, *_held) if _held else _base)
