"""Nothing an MCP stdio server started outlives the agent, even a SIGKILLed agent.

Two rules, because each covers what the other cannot (``sandbox/process.py`` starts the
servers and the keeper, and states the one kill policy):

* the server itself gets the parent-death signal every child of the agent gets (SIGKILL):
  when the agent dies, however it dies, the kernel kills the server, even one that
  ignores stdin EOF and SIGTERM;
* the server's own children do not inherit that signal, so a small keeper process (this
  file, run as a script with ``python3 -I -S``, stdlib only) holds the read end of a pipe
  from the agent and the list of the servers' process groups. When the agent dies the
  keeper hears it twice: its own parent-death signal (SIGTERM, which it handles; it is
  blocked until the keeper has set its handler, so none is lost at its start) and the
  end of its pipe, which the kernel closes for a SIGKILLed agent too. Either way it reads
  what is left in the pipe, SIGKILLs every group still listed and exits. One keeper
  serves the whole agent process; it starts with the first stdio server.

A group is listed once its server is started and unlisted once the server has exited and
its group was killed (``process.py`` kills what a program leaves in its group).
"""

import logging
import os
import select
import signal
import sys
import threading

log = logging.getLogger(__name__)

DEATH_SIGNAL = signal.SIGTERM  # the keeper's parent-death signal (handled: module docstring)
_keeper = None  # (owner pid, process.Process, its stdin descriptor) of this process's keeper
_starting = threading.Lock()


# ---------------------------------------------------------------- in the agent
def start():
    """Start this process's keeper unless it runs (each launch holds the hub a while:
    ``mcp/stdio.py`` starts it before its server, not right after); never raises."""
    with _starting:
        _started()


def watch(pgid):
    """List ``pgid`` with the keeper (started on first use); never raises."""
    _tell(b"+%d\n" % pgid)


def unwatch(pgid):
    _tell(b"-%d\n" % pgid)


def _tell(line):
    with _starting:  # one keeper for servers starting side by side; lines in call order
        keeper = _started()
        if keeper is None:
            return
        from term2acp.sandbox import process  # loaded by the first stdio server (stdio.py)

        try:
            keeper.write(line)
        except process.InputClosed as exc:  # gone: the servers' own death signal still holds
            log.warning("mcp keeper: cannot write to it (%s); server children may outlive a "
                        "killed agent", os.strerror(exc.errno))


def _started():
    global _keeper
    if _keeper is not None and _keeper[0] == os.getpid():
        return _keeper[1]
    if _keeper is not None:  # inherited through a fork: that keeper is our parent's
        try:
            os.close(_keeper[2])
        except OSError:
            pass
        _keeper = None
    from term2acp.sandbox import process  # loaded by the first stdio server (stdio.py)

    null = os.open(os.devnull, os.O_WRONLY)
    try:
        keeper = process.start([sys.executable, "-I", "-S", os.path.abspath(__file__)],
                               stdin=process.PIPE, stdout=null, death_signal=DEATH_SIGNAL,
                               counted=False)
    except OSError as exc:
        log.warning("mcp keeper: cannot start it (%s); server children may outlive a killed "
                    "agent", exc.strerror or exc)
        return None
    finally:
        os.close(null)
    _keeper = (os.getpid(), keeper, keeper.input)
    log.debug("mcp keeper: pid %s", keeper.pid)
    return keeper


# ---------------------------------------------------------------- the keeper process
def main():
    """Read ``+pgid`` / ``-pgid`` lines until the agent is gone (end of file, or the death
    signal), then SIGKILL every group still listed."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    wake, woken = os.pipe()
    os.set_blocking(woken, False)
    signal.set_wakeup_fd(woken)
    signal.signal(DEATH_SIGNAL, lambda *_: None)  # it wakes the select below (wakeup fd)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {DEATH_SIGNAL})  # blocked since the start
    os.set_blocking(0, False)
    groups, pending, gone = set(), b"", False
    while not gone:
        gone = wake in select.select([0, wake], [], [])[0]  # then: read what is left, end
        while True:
            try:
                data = os.read(0, 4096)
            except BlockingIOError:
                break
            except OSError:
                data = b""
            if not data:
                gone = True
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
