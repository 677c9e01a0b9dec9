"""The network of one session's commands: a private loopback that all of them share.

Why this design (the README's developer notes say the same): a background server one
call starts on 127.0.0.1 must be reachable by the next call's ``curl``, so the commands of
a session need one network namespace, while each command keeps everything else of its
own sandbox: a fresh bubblewrap with its own mount view (credential masks recomputed per
command), pid namespace (killing a command ends its whole tree), cgroup (tasks, memory)
and timeout. One long-lived sandbox per session running every command (a supervisor in
one bwrap) would share the network too, but also one frozen filesystem view, one set of
limits and one more process to keep alive and to kill.

So a session holds a *user and network namespace pair*, and nothing else: a short-lived
``bwrap --unshare-user --unshare-net`` makes them (with ``lo`` up), blocks on a pipe
while the agent opens ``/proc/<pid>/ns/{user,net}``, then exits. The two descriptors keep
the namespaces alive, no process does: when the session closes or the agent dies they
are gone. Each command's child joins them (``setns``, in the forked child before it execs
bwrap; joining the user namespace first, which the agent owns, is what lets an
unprivileged agent join its network namespace), and bwrap then builds the command's own
sandbox inside: a nested user namespace, capabilities dropped, no ``--unshare-net``.

A command granted the host network (``network=True``, ``bwrap.py``) does not join: it
runs on the host's network and does not see the session's loopback.

Where the pair cannot be made (a host whose bubblewrap may not make a user namespace for
an unprivileged user), commands run as before this existed, each in an empty network
namespace of its own: ``unavailable`` says why (logged once, and the start of a background
process tells the model its ports are not reachable from other commands).
"""

import ctypes
import json
import logging
import os

from gevent.lock import Semaphore
from gevent.socket import wait_read

from term2acp.sandbox import process, view

log = logging.getLogger(__name__)

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
MAKE_TIMEOUT = 10.0
_libc = ctypes.CDLL(None, use_errno=True)


class LoopbackError(OSError):
    """The session's network namespace could not be made; the message says why."""


class Loopback:
    """The user and network namespaces of one session, made on first use."""

    def __init__(self):
        self._fds = None  # (user, net) descriptors
        self._lock = Semaphore()  # calls in parallel make one pair, not two
        self.closed = False
        self.unavailable = None  # why the pair cannot be made here, once known

    def enter_hook(self, availability):
        """A pre-exec hook joining the namespaces (made now if needed, by ``bwrap``
        ``availability.bwrap``), or None where they cannot be made (``unavailable``);
        raises :class:`LoopbackError` once the session is closed."""
        with self._lock:
            if self.closed:
                raise LoopbackError(0, "the session's sandbox is closed")
            if self._fds is None and self.unavailable is None:
                try:
                    self._fds = _make(availability.bwrap)
                except LoopbackError as exc:
                    self.unavailable = _note_unavailable(exc.strerror)
            if self._fds is None:
                return None
            user, net = self._fds
        return lambda: _join(user, net)

    def close(self):
        with self._lock:
            self.closed = True
            fds, self._fds = self._fds, None
        for fd in fds or ():
            os.close(fd)


_warned = set()


def _note_unavailable(reason):
    if reason not in _warned:
        _warned.add(reason)
        log.warning("sandbox: commands of a session cannot share a network namespace here "
                    "(%s); each runs in an empty one of its own", reason)
    return reason


def _join(user, net):
    """Runs in the forked child: the user namespace first (the agent owns it, so the child
    gets the rights to join the network namespace that belongs to it), then the network."""
    for fd, kind in ((user, CLONE_NEWUSER), (net, CLONE_NEWNET)):
        if _libc.setns(fd, kind) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"setns: {os.strerror(code)}")


def _make(bwrap):
    """Run the short-lived bwrap that makes the pair; open and return its namespaces."""
    info_read, info_write = os.pipe()
    block_read, block_write = os.pipe()
    argv = [bwrap, "--unshare-user", "--unshare-net", "--cap-drop", "ALL", "--die-with-parent",
            *view.system_flags(), "--info-fd", str(info_write), "--block-fd", str(block_read),
            "--", "true"]
    output = bytearray()
    child = None
    try:
        os.set_inheritable(info_write, True)
        os.set_inheritable(block_read, True)
        child = process.start(argv, cwd="/", env={"PATH": "/usr/bin:/bin"},
                              on_output=output.extend, pass_fds=(info_write, block_read))
        os.close(info_write)
        info_write = None
        pid = _child_pid(info_read)
        fds = []
        try:  # the pair is returned, or closed: also when a cancel kills this greenlet
            for kind in ("user", "net"):
                fds.append(os.open(f"/proc/{pid}/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC))
            os.write(block_write, b"x")
            outcome = child.wait(MAKE_TIMEOUT)
            if outcome != process.Exit(0, None):
                raise LoopbackError(0, f"bwrap ended with {outcome}: {_last(output)}")
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        return tuple(fds)
    except (OSError, ValueError, KeyError) as exc:
        if isinstance(exc, LoopbackError):
            raise
        raise LoopbackError(getattr(exc, "errno", 0) or 0,
                            f"cannot make the session's network namespace: {exc} "
                            f"{_last(output)}".strip()) from None
    finally:
        if child is not None:
            child.kill()
        for fd in (info_read, info_write, block_read, block_write):
            if fd is not None:
                os.close(fd)


def _child_pid(fd):
    """The sandbox's pid from bwrap's ``--info-fd`` JSON (read until it parses or EOF)."""
    os.set_blocking(fd, False)
    data = bytearray()
    while True:
        wait_read(fd, timeout=MAKE_TIMEOUT, timeout_exc=LoopbackError(0, "bwrap did not start"))
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            continue
        data += chunk
        try:
            return int(json.loads(data)["child-pid"])
        except ValueError:
            if not chunk:
                raise LoopbackError(0, "bwrap did not report its sandbox") from None


def _last(output):
    lines = bytes(output).decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else ""
