"""Letting the hub breathe from a busy loop: yield so that I/O is polled too.

``gevent.sleep(0)`` only queues the greenlet behind the loop's callbacks. When greenlets
keep yielding that way (a model stream that yields every few milliseconds, the writer it
wakes), gevent runs up to 50 callbacks before it looks at the clock and polls for I/O: a
loop yielding every 5 ms could leave stdin unread for about 250 ms, so a session/list or a
session/cancel waited that long while a fast answer streamed (issue 16). A timer, however
short, makes the loop go through a whole iteration, I/O included.
"""

import gevent

POLL = 1e-6  # seconds: any timer makes the event loop poll for I/O before it fires


def breathe():
    """Yield to the hub and let it poll for I/O (stdin, sockets, pipes) before resuming."""
    gevent.sleep(POLL)
