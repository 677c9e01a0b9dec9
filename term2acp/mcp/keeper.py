"""Nothing an MCP stdio server started outlives the agent, even a SIGKILLed agent.

Two rules, because each covers what the other cannot:

* the server itself gets a parent-death signal (``PR_SET_PDEATHSIG`` = SIGKILL, set in the
  forked child before ``exec``): when the agent dies, however it dies, the kernel kills
  the server, even one that ignores stdin EOF and SIGTERM;
* the server's own children do not inherit that signal, so a small keeper process (this
  file, run as a script with ``python3 -I -S``, stdlib only) holds the read end of a pipe
  from the agent and the list of the servers' process groups. When the pipe ends, which
  the kernel does for a SIGKILLed agent too, it SIGKILLs every group still listed and
  exits. One keeper serves the whole agent process; it starts with the first stdio server.

A group is listed once its server is started and unlisted after ``close`` killed it.
"""

import logging
import os
import signal
import sys
import threading

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
_keeper = None  # (owner pid, Popen, write fd) of this process's keeper
_starting = threading.Lock()
_prctl = None


# ---------------------------------------------------------------- in the agent
def die_with_parent():
    """A ``preexec_fn`` for a server: SIGKILL when the agent (its parent) dies. Loads
    libc's ``prctl`` in the agent first (a forked child must not import)."""
    global _prctl
    if _prctl is None:
        import ctypes

        try:
            _prctl = ctypes.CDLL(None, use_errno=True).prctl
        except (AttributeError, OSError):  # not Linux: the keeper alone stops the group
            _prctl = False
    if not _prctl:
        return None
    prctl, parent = _prctl, os.getpid()

    def in_child():
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the agent died before the signal was armed
            os.kill(os.getpid(), signal.SIGKILL)
    return in_child


def watch(pgid):
    """List ``pgid`` with the keeper (started on first use); never raises."""
    _tell(b"+%d\n" % pgid)


def unwatch(pgid):
    _tell(b"-%d\n" % pgid)


def _tell(line):
    fd = _ensure()
    if fd is None:
        return
    try:
        os.write(fd, line)
    except OSError as exc:  # the keeper is gone: the servers' own death signal still holds
        log.warning("mcp keeper: cannot write to it (%s); server children may outlive a "
                    "killed agent", exc.strerror or exc)


def _ensure():
    with _starting:  # two servers starting side by side start one keeper, not two
        return _started()


def _started():
    global _keeper
    if _keeper is not None and _keeper[0] == os.getpid():
        return _keeper[2]
    if _keeper is not None:  # inherited through a fork: that keeper is our parent's
        try:
            os.close(_keeper[2])
        except OSError:
            pass
        _keeper = None
    import gevent.subprocess

    try:
        proc = gevent.subprocess.Popen(
            [sys.executable, "-I", "-S", os.path.abspath(__file__)],
            stdin=gevent.subprocess.PIPE, stdout=gevent.subprocess.DEVNULL,
            stderr=gevent.subprocess.DEVNULL, start_new_session=True, close_fds=True)
    except OSError as exc:
        log.warning("mcp keeper: cannot start it (%s); server children may outlive a killed "
                    "agent", exc.strerror or exc)
        return None
    fd = os.dup(proc.stdin.fileno())  # a plain descriptor: close-on-exec, never buffered
    proc.stdin.close()
    _keeper = (os.getpid(), proc, fd)
    log.debug("mcp keeper: pid %s", proc.pid)
    return fd


# ---------------------------------------------------------------- the keeper process
def main():
    """Read ``+pgid`` / ``-pgid`` lines until EOF, then SIGKILL every group still listed."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    groups, pending = set(), b""
    while True:
        try:
            data = os.read(0, 4096)
        except InterruptedError:
            continue
        except OSError:
            break
        if not data:
            break
        *lines, pending = (pending + data).split(b"\n")
        for line in lines:
            if line[:1] in (b"+", b"-") and line[1:].isdigit() and int(line[1:]) > 1:
                (groups.add if line[:1] == b"+" else groups.discard)(int(line[1:]))
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass


if __name__ == "__main__":
    main()
