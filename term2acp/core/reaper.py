"""What a dead agent left running: a record of each sandbox's first process, swept at
start-up.

The parent-death signal (``process.py``) ends a sandbox when its agent dies, and the
cgroup sweep (``cgroup.py``) ends what is left in a dead agent's run groups where pids
cgroups can be made. This record works on every host: each agent appends the pid and
start time of each sandbox's first process (the outer bwrap) to
``<data dir>/sandboxes/<agent pid>-<agent start time>``. An agent starting up SIGKILLs
the recorded processes of agents that are gone, which ends each sandbox's pid namespace
with it (bwrap's pid 1 has the parent-death signal), and removes their records. A pid
whose start time is not the recorded one belongs to another process now and is left
alone. An agent that exits normally removes its own record.
"""

import atexit
import logging
import os
import signal as signals
import threading

from term2acp.core import private

log = logging.getLogger(__name__)

FOLDER = "sandboxes"
PRUNE_EVERY = 256  # records appended before the file is rewritten with the live ones

_lock = threading.Lock()
_own = {}  # data dir -> _Record of this process


def record(data_dir, pid):
    """Note that ``pid`` (a sandbox's first process) was started by this agent."""
    if not data_dir:
        return
    with _lock:
        own = _own.get(data_dir)
        if own is None or own.agent != os.getpid():  # (a forked test agent: its own file)
            own = _own[data_dir] = _Record(data_dir)
        own.add(pid)


def sweep(data_dir):
    """SIGKILL what dead agents recorded and remove their records; how many were killed."""
    folder = os.path.join(data_dir or "", FOLDER)
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    killed = 0
    for name in names:
        pid, _, start = name.partition("-")
        if not (pid.isdigit() and start.isdigit()) or _started(int(pid)) == int(start):
            continue  # not a record, or its agent is alive
        path = os.path.join(folder, name)
        for child, child_start in _read(path):
            if _started(child) == child_start:
                try:
                    os.kill(child, signals.SIGKILL)
                    killed += 1
                except (ProcessLookupError, PermissionError):
                    pass
        _unlink(path)
    if killed:
        log.warning("killed %d sandboxes that agents which have died left running", killed)
    return killed


class _Record:
    def __init__(self, data_dir):
        self.agent = os.getpid()
        folder = os.path.join(data_dir, FOLDER)
        self.path = os.path.join(folder, f"{self.agent}-{_started(self.agent)}")
        self.live = []  # (pid, start time)
        self.appended = 0
        try:
            private.make_dirs(folder)
        except OSError as exc:
            log.warning("cannot record sandboxes in %s: %s", folder, exc)
        atexit.register(_unlink, self.path)

    def add(self, pid):
        start = _started(pid)
        if start is None:
            return  # already gone
        self.live.append((pid, start))
        self.appended += 1
        if self.appended >= PRUNE_EVERY:
            self.appended = 0
            self.live = [(p, s) for p, s in self.live if _started(p) == s]
            self._write("w", self.live)
        else:
            self._write("a", [(pid, start)])

    def _write(self, mode, entries):
        try:
            flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if mode == "w" else os.O_APPEND)
            with os.fdopen(private.open_file(self.path, flags), mode) as fh:
                fh.write("".join(f"{pid} {start}\n" for pid, start in entries))
        except OSError as exc:
            log.debug("cannot record sandboxes in %s: %s", self.path, exc)


def _read(path):
    try:
        with open(path) as fh:
            lines = fh.read().split("\n")
    except OSError:
        return []
    out = []
    for line in lines:
        fields = line.split()
        if len(fields) == 2 and fields[0].isdigit() and fields[1].isdigit():
            out.append((int(fields[0]), int(fields[1])))
    return out


def _started(pid):
    """The start time of ``pid`` in clock ticks since boot (``/proc/<pid>/stat`` field
    22), or None when there is no such process (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] == b"Z":
        return None
    return int(fields[19])


def _unlink(path):
    try:
        os.unlink(path)
    except OSError:
        pass
