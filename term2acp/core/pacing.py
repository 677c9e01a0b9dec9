"""Letting the hub breathe from a busy loop: yield so that I/O is polled too.

``gevent.sleep(0)`` only queues the greenlet behind the loop's callbacks. When greenlets
keep yielding that way (a model stream that yields every few milliseconds, the writer it
wakes), gevent runs a batch of callbacks before it looks at the clock and polls for I/O,
so stdin could stay unread long enough for a session/list or a session/cancel to wait
visibly while a fast answer streamed. A timer, however
short, makes the loop go through a whole iteration, I/O included.
"""

import gevent

POLL = 1e-6  # seconds: any timer makes the event loop poll for I/O before it fires


def breathe():
    """Yield to the hub and let it poll for I/O (stdin, sockets, pipes) before resuming."""
    gevent.sleep(POLL)
