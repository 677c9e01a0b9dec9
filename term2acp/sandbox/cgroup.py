"""Per-command resource limits: a cgroup per run (pids, and memory on cgroup v2), else
``RLIMIT_DATA`` for memory.

``Limits`` says what one command may use; ``RunGroup.create`` makes a cgroup for it where
one can be made, and ``Limits.apply_in_child`` runs in the forked child before exec: it
joins the group and, when no cgroup carries the memory limit, sets ``RLIMIT_DATA``.

Why these mechanisms:

* RLIMIT_NPROC does not bind uid 0, and the sandbox runs as the agent's uid, so a pids
  cgroup is the only task limit that holds when the agent runs as root. Without one the
  timeout is the only bound.
* Memory: a cgroup v2 ``memory.max`` (swap off) bounds the whole command tree, tmpfs pages
  included, and the kernel's OOM killer ends the command, never the agent. It needs the
  memory controller delegated to the agent's cgroup. Otherwise ``RLIMIT_DATA`` bounds each
  process's heap and private writable mappings (a 3 GiB allocation fails with ENOMEM).
  ``RLIMIT_AS`` is not used: runtimes that reserve address space (Go, the JVM, V8) break.
  cgroup v1 memory is not used either: its accounting differs and it is going away.
"""

import logging
import os
import resource
import signal as signals

from term2acp.core.scratch import pid_alive

log = logging.getLogger(__name__)

MECHANISM_CGROUP = "cgroup v2 memory.max"
MECHANISM_RLIMIT = "RLIMIT_DATA"


class Limits:
    """What one command may use: ``pids_max`` tasks, ``memory_bytes`` of memory."""

    def __init__(self, pids_max=None, memory_bytes=None):
        self.pids_max = pids_max
        self.memory_bytes = memory_bytes

    def group(self):
        """A fresh :class:`RunGroup` for one run, or None."""
        if not self.pids_max:
            return None
        return RunGroup.create(self.pids_max, self.memory_bytes)

    def apply_in_child(self, group):
        """Runs in the forked child before exec: join the group, cap the heap if needed."""
        if group is not None:
            group.join()
        if self.memory_bytes and (group is None or not group.memory):
            resource.setrlimit(resource.RLIMIT_DATA, (self.memory_bytes, self.memory_bytes))


def memory_mechanism():
    """The memory limit in force for sandboxed commands on this machine."""
    return MECHANISM_CGROUP if RunGroup.memory_supported() else MECHANISM_RLIMIT


class RunGroup:
    """A cgroup for one run: ``pids.max`` always, ``memory.max`` where cgroup v2 delegates
    the memory controller. Where no pids cgroup can be made, ``create`` returns None."""

    _parent = None  # cached: a directory path, or "" when unusable
    _memory = None  # cached: whether run groups get memory.max
    _count = 0
    _stale = set()  # groups whose removal was busy; retried on the next create

    def __init__(self, path, memory=False):
        self.path = path
        self.memory = memory

    @classmethod
    def supported(cls):
        """Whether pids cgroups can be made here (found out once)."""
        if cls._parent is None:
            cls._parent = _pids_parent() or ""
            cls._memory = bool(cls._parent) and _delegates_memory(cls._parent)
            log.info("cgroup for commands: %s; memory limit: %s", cls._parent or
                     "none (timeouts only)", MECHANISM_CGROUP if cls._memory else MECHANISM_RLIMIT)
            if cls._parent:
                _sweep(cls._parent)
        return bool(cls._parent)

    @classmethod
    def memory_supported(cls):
        return cls.supported() and cls._memory

    @classmethod
    def create(cls, pids_max, memory_bytes=None):
        """A fresh cgroup limited to ``pids_max`` tasks (and ``memory_bytes``), or None."""
        if not cls.supported():
            return None
        for stale in list(cls._stale):
            cls(stale).close()
        cls._count += 1
        path = os.path.join(cls._parent, f"run-{os.getpid()}-{cls._count}")
        try:
            os.mkdir(path)
            _write(os.path.join(path, "pids.max"), str(int(pids_max)))
            memory = bool(memory_bytes) and cls._memory and _limit_memory(path, memory_bytes)
        except OSError as exc:
            log.warning("cannot set up cgroup %s: %s", path, exc)
            _rmdir(path)
            return None
        return cls(path, memory)

    def join(self):
        """Move the calling process in; runs in the forked child before exec.

        On cgroup v1, writing 0 (``current``) to ``tasks`` moves just this thread, which
        skips the global threadgroup lock and its RCU grace period (paid on every command
        through ``cgroup.procs``). The forked child is single-threaded, so it is the same.
        """
        tasks = os.path.join(self.path, "tasks")
        _write(tasks if os.path.exists(tasks) else os.path.join(self.path, "cgroup.procs"), "0")

    def close(self):
        """SIGKILL whatever is left in the group and remove it (later, if still busy)."""
        try:
            with open(os.path.join(self.path, "cgroup.procs")) as fh:
                for line in fh:
                    _kill(int(line))
        except (OSError, ValueError):
            pass
        if _rmdir(self.path):
            self._stale.discard(self.path)
        else:
            self._stale.add(self.path)


def _limit_memory(path, memory_bytes):
    """memory.max, no swap, and the OOM killer takes the whole group; True when set."""
    limit = os.path.join(path, "memory.max")
    if not os.path.exists(limit):
        return False
    _write(limit, str(int(memory_bytes)))
    for name, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
        try:
            _write(os.path.join(path, name), value)
        except OSError:
            pass
    return True


def _pids_parent():
    """``<pids hierarchy>/<our cgroup>/term2acp`` (cgroup v1, or v2 where delegated)."""
    try:
        with open("/proc/self/cgroup") as fh:
            lines = [line.rstrip("\n").split(":", 2) for line in fh]
    except OSError:
        return None
    for _, controllers, path in lines:
        if "pids" in controllers.split(","):
            return _make_parent(os.path.join("/sys/fs/cgroup/pids", path.lstrip("/")))
    for hid, controllers, path in lines:
        if hid == "0" and controllers == "":
            return _make_parent(os.path.join("/sys/fs/cgroup", path.lstrip("/")))
    return None


def _delegates_memory(parent):
    """cgroup v2 only: whether the run groups under ``parent`` get the memory controller."""
    try:
        with open(os.path.join(parent, "cgroup.subtree_control")) as fh:
            return "memory" in fh.read().split()
    except OSError:
        return False


def _sweep(parent):
    """End what agents that have exited left behind: SIGKILL every process still in their
    run groups (a sandbox whose parent-death signal never came), then remove the groups
    (later, if their processes take a moment to die)."""
    for name in os.listdir(parent):
        owner = name.split("-")[1] if name.startswith("run-") else ""
        if owner.isdigit() and not pid_alive(int(owner)):
            path = os.path.join(parent, name)
            left = RunGroup(path)
            left.close()
            if path in RunGroup._stale:
                log.warning("killed what a dead agent (pid %s) left running in %s", owner, path)



def _make_parent(base):
    """Our own sub-hierarchy under ``base``; None unless it offers ``pids.max``."""
    path = os.path.join(base, "term2acp")
    try:
        os.makedirs(path, exist_ok=True)
        control = os.path.join(path, "cgroup.subtree_control")
        if os.path.exists(control):  # cgroup v2: delegate pids (and memory) to run groups
            _write(control, "+pids")
            try:
                _write(control, "+memory")
            except OSError:
                pass  # not delegated to us: RLIMIT_DATA instead
    except OSError:
        return None
    if os.path.exists(os.path.join(path, "pids.max")):
        return path
    _rmdir(path)  # no pids controller here: leave nothing behind
    return None


def _write(path, text):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _rmdir(path):
    try:
        os.rmdir(path)
    except FileNotFoundError:
        pass
    except OSError:
        return False
    return True


def _kill(pid):
    try:
        os.kill(pid, signals.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
