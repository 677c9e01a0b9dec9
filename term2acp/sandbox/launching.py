"""What ``process.py``'s launch changes while ``sh`` forks and execs, and why.

gevent >= 25.8 routes ``os.close`` through the hub so that watchers on the descriptor are
closed first. ``sh`` forks and then closes descriptors in both the parent and the child;
in the child there is no running hub and the deferred close never happens (the launch
hangs or fails with ``ForkException``). So a launching greenlet, and its forked child
(where the same greenlet object runs), close with the original ``os.close``, except a
descriptor the parent waited for (below), which gevent's close must tell the event loop
about.

After the fork, ``sh``'s parent reads a pipe until the child has exec'd (or written why
it could not). As a plain read that held the hub for the child's whole way to ``exec``:
its page faults, the pre-exec hook, the start of bubblewrap, tens of milliseconds on a busy
machine. A launching greenlet waits for that pipe cooperatively instead (the hub serves
meanwhile), then reads it; only the fork itself holds the hub.

A kill (a cancel, a timeout) that arrives during that wait is held, not raised: raised
there it would leave a started child that nobody records, reaps or kills. The launch
returns it; ``process.start`` kills the child, then raises it.

While at least one greenlet is launching, ``os.close`` and ``os.read`` are this module's
functions; they behave differently only for the launching greenlets (other greenlets get
gevent's ``os.close`` and the plain ``os.read``, as always), and are put back when the last
launch ends.
"""

import os
from contextlib import contextmanager

import gevent
from gevent import monkey
from gevent.socket import wait_read

_original_close = monkey.get_original("os", "close")
_original_read = monkey.get_original("os", "read")


class Held:
    """One launch: ``exc`` is the kill it received while waiting for the exec, or None;
    ``waited``: the descriptors it waited for (closed through the hub: see ``_close``)."""

    __slots__ = ("exc", "waited")

    def __init__(self):
        self.exc = None
        self.waited = set()


_launching = {}  # greenlet -> its Held
_saved = []  # the (close, read) to put back when the last launch ends
_pid = []  # the agent's pid while a launch runs (a forked child differs)


@contextmanager
def launch():
    """Mark the current greenlet as launching for the ``with`` block; yields its
    :class:`Held`."""
    current = gevent.getcurrent()
    if not _launching:
        _saved[:] = [os.close, os.read]
        _pid[:] = [os.getpid()]
        os.close, os.read = _close, _read
    held = _launching[current] = Held()
    try:
        yield held
    finally:
        del _launching[current]
        if not _launching:
            os.close, os.read = _saved


def _close(fd):
    held = _launching.get(gevent.getcurrent())
    if held is None:
        return _saved[0](fd)
    if fd in held.waited and os.getpid() == _pid[0]:
        # gevent's close: the event loop forgets the descriptor, so a new one given the
        # same number is watched afresh (the original close would leave its epoll entry)
        held.waited.discard(fd)
        return _saved[0](fd)
    return _original_close(fd)


def _read(fd, size):
    held = _launching.get(gevent.getcurrent())
    if held is not None and os.getpid() == _pid[0]:
        held.waited.add(fd)
        while True:  # readable once the child has exec'd (the pipe closes) or failed
            try:
                wait_read(fd)
                break
            except (gevent.GreenletExit, gevent.Timeout) as exc:  # held: module docstring
                held.exc = held.exc or exc
    return _saved[1](fd, size) if held is None else _original_read(fd, size)
