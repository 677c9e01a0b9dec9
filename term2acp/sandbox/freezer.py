"""Freezing a command tree while the agent changes files under it (/undo) or stops it
writing (read-only and plan modes).

Each started command is a process of the agent (bubblewrap) whose descendants may have
moved to sessions and groups of their own, so signalling a group is not enough: the tree
is found through ``/proc`` (parent pids) and every process in it gets SIGSTOP, again
until a scan finds no process that is not stopped yet (a stopped process cannot fork, so
this ends; it is bounded anyway). ``thaw`` sends SIGCONT to the same processes. Without
``/proc`` nothing can be found beyond the started processes themselves, which are
stopped alone.
"""

import logging
import os
import signal as signals
import time

import gevent

log = logging.getLogger(__name__)

SCANS = 50  # rounds of scan-and-stop before giving up on a tree that keeps growing
SETTLE = 1.0  # seconds to wait for the stopped processes to show as stopped


def _parents():
    """pid -> parent pid of every process visible in /proc."""
    out = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1:
            out[int(name)] = int(fields[1])
    return out


def tree(roots):
    """The pids of ``roots`` and all their descendants."""
    children = {}
    for pid, parent in _parents().items():
        children.setdefault(parent, []).append(pid)
    found, todo = set(), [r for r in roots if r]
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        found.add(pid)
        todo.extend(children.get(pid, ()))
    return found


def _state(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None  # gone
    return stat[stat.rfind(b")") + 2:][:1].decode()


def _signal(pid, sig):
    try:
        os.kill(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def terminate(root):
    """SIGTERM to every process below ``root`` that is not bubblewrap itself (SIGTERM to
    bubblewrap would end its namespace, and so every process in it, at once): the command
    and what it started may clean up. Returns how many were signalled."""
    signalled = 0
    for pid in tree([root]) - {root}:
        try:
            with open(f"/proc/{pid}/comm", "rb") as fh:
                if fh.read().strip() == b"bwrap":
                    continue
        except OSError:
            continue
        signalled += _signal(pid, signals.SIGTERM)
    return signalled


class Frozen:
    """The processes one :func:`freeze` stopped; :meth:`thaw` lets them run again."""

    def __init__(self, pids):
        self.pids = pids

    def thaw(self):
        for pid in self.pids:
            _signal(pid, signals.SIGCONT)
        self.pids = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.thaw()


def freeze(roots):
    """Stop ``roots`` (pids) and every process below them; returns :class:`Frozen`."""
    stopped = []
    seen = set()
    for _ in range(SCANS):
        fresh = [pid for pid in sorted(tree(roots) | set(roots)) if pid and pid not in seen]
        if not fresh:
            break
        for pid in fresh:
            seen.add(pid)
            if _signal(pid, signals.SIGSTOP):
                stopped.append(pid)
        _settle(fresh)
    else:
        log.warning("a command tree kept growing while being frozen (%d processes)",
                    len(stopped))
    return Frozen(stopped)


def _settle(pids):
    """Wait (bounded) until ``pids`` show as stopped or gone: only then can a fresh scan
    trust that none of them forks any more."""
    deadline = time.monotonic() + SETTLE
    waiting = list(pids)
    while waiting and time.monotonic() < deadline:
        waiting = [pid for pid in waiting if _state(pid) not in (None, "T", "t", "Z", "X")]
        if waiting:
            gevent.sleep(0.001)
