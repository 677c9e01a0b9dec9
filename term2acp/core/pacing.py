"""Letting the hub breathe from a busy loop: yield so that I/O is polled too.

``gevent.sleep(0)`` only queues the greenlet behind the loop's callbacks. When greenlets
keep yielding that way (a model stream that yields every few milliseconds, the writer it
wakes), gevent runs up to 50 callbacks before it looks at the clock and polls for I/O: a
loop yielding every 5 ms could leave stdin unread for about 250 ms, so a session/list or a
session/cancel waited that long while a fast answer streamed (issue 16). A timer, however
short, makes the loop go through a whole iteration, I/O included.
"""

import gc
import sys

import gevent

POLL = 1e-6  # seconds: any timer makes the event loop poll for I/O before it fires
COLLECTOR_HOLD = 1.0  # seconds start-up may keep the garbage collector off, at most


def start_up_done():
    """Start-up is over: the garbage collector, which the launcher turned off
    (``term2acp/patching.py``), collects again. Nothing when it was on already.

    What start-up made (~16,000 tracked objects: modules, classes, functions, schemas)
    lives as long as the process, but for ~1,000 garbage objects. One young collection
    frees those (~3 ms: it walks all of them), then the rest goes straight to the oldest
    generation (``freeze`` then ``unfreeze`` moves it there without a walk), so that no
    later collection walks it again before a full one. Called once the editor's first
    calls are served: after ``initialize`` and the first ``session/new`` (the warm-up's
    first step, ``warmup.py``), or ``COLLECTOR_HOLD`` seconds after the server starts
    reading, whichever comes first (:func:`hold_collector`). (Moved there without the
    young collection, the garbage stayed: +0.4 MiB of idle RSS, against a goal of
    < 40 MB; collected as they aged, the objects were walked again by the turn layer's
    first collections, which the first prompt waits for.)"""
    if not gc.isenabled():
        gc.collect(0)
        gc.freeze()
        gc.unfreeze()
        gc.enable()


def hold_collector(seconds=COLLECTOR_HOLD):
    """Turn the collector back on in ``seconds`` at the latest (a loop timer: no greenlet,
    and it keeps no loop alive), in case :func:`start_up_done` is not called before."""
    if gc.isenabled():
        return
    timer = gevent.get_hub().loop.timer(seconds)
    timer.ref = False
    timer.start(start_up_done)


def breathe():
    """Yield to the hub and let it poll for I/O (stdin, sockets, pipes) before resuming."""
    gevent.sleep(POLL)


# ---------------------------------------------------------------- the GIL hand-over period
# Native threads that work for the hub (the warm-up, the session store) ask for a short
# switch interval while they run, so the hub and they take turns quickly. The interval is
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
