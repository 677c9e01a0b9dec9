"""Child processes under gevent: the one module that imports ``sh``.

``start`` launches a program in its own session (so its pid is its process group id) and
returns a :class:`Process`. Its stdin is ``/dev/null``, a pipe the caller writes to, or a
pseudo-terminal (``tty``) that is also its output and its controlling terminal
(``ends.py``). Its output is either pumped to a callback by a greenlet of its own, in
coalesced chunks (``output.py``: stdout and stderr together, or stderr apart to a
descriptor of the caller's), or goes to descriptors of the caller's, which reads them
itself (``stdout=``, ``stderr=``: the MCP stdio servers, whose stdout is JSON-RPC and
whose stderr is their log). Either way the process is watched apart from its output, by
its pidfd (a process it leaves holding a pipe cannot hide its exit), and reaped once it
has exited. ``run`` is ``start`` and a wait under a deadline: it kills the whole process
group when it times out or when the calling greenlet is killed (cancellation arrives as a
``GreenletExit`` subclass). ``capture.py`` runs a helper's command for what it prints.

The one kill policy, for everything the agent starts (the model's commands in the
sandbox, hooks, the agent's own helpers, language servers, MCP servers, their keeper):

* a program's processes end with it: once it has exited and is reaped, what it left in its
  process group is SIGKILLed; ``Process.kill`` SIGKILLs the whole group (after a SIGTERM
  to the command's processes with a ``grace``; ``signal`` sends one signal to the group,
  e.g. the MCP servers' SIGTERM before their SIGKILL);
* nothing outlives the agent, even a ``kill -9`` of it: every child gets a parent-death
  signal (``PR_SET_PDEATHSIG``) before it execs, set last so no credential change clears
  it, and checked against the agent having died before it was set. It is SIGKILL
  (``death_signal``), except for the MCP servers' keeper (``mcp/keeper.py``), whose job
  is to run when the agent has died: its death signal is SIGTERM, which it handles by
  killing the process groups it holds and exiting; that signal is blocked in the child
  (the block survives ``exec``) so one sent before the keeper installed its handler waits
  for it. bubblewrap (``--die-with-parent``) passes the signal on to the sandbox's pid 1,
  whose death ends the whole pid namespace; bubblewrap arms those signals without
  checking, so the sandbox also keeps its own watch on the agent (``bwrap.lifeline``):
  nothing starts once the agent is gone, and the pid namespace is killed when it goes.
  What an MCP server's own children do escapes its death signal (they do not inherit it):
  the keeper kills their groups. The start-up sweeps of a dead agent's records
  (``core/reaper.py``, every host) and run cgroups (``cgroup.py``) are the last line.

:func:`live` counts the started commands not yet reaped (``bwrap.alive``: while one runs,
a path in a root may change under the editor); the MCP servers and their keeper, which
the user configured and which run beside the agent as the editor would run them, are
started with ``counted=False``.

Why the ``os.close`` swap: gevent >= 25.8 routes ``os.close`` through the hub so that
watchers on the descriptor are closed first. ``sh`` forks and then closes descriptors in
both the parent and the child; in the child there is no running hub and the deferred close
never happens (the launch hangs or fails with ``ForkException``). Nothing yields between
the fork and the return of the launch call, so swapping the original ``os.close`` in for
just that call is safe, and everything afterwards (waiting, output, kill) is cooperative.

Output is read from a pipe (or the terminal's master side) this module owns rather than
through ``sh``'s ``_out`` callbacks: ``sh`` reads line-buffered (or 1-byte unbuffered)
chunks, which is far too slow for a gigabyte of output. Reading 64 KiB at a time and
coalescing small reads keeps both throughput and the number of callbacks sane.
"""

import ctypes
import errno
import fcntl
import logging
import os
import signal as signals
import termios
from collections import namedtuple

import gevent
import gevent.os
import sh
from gevent import monkey
from gevent.event import Event
from gevent.socket import wait_read, wait_write

from term2acp.core.pacing import spaced
from term2acp.sandbox import freezer
from term2acp.sandbox.ends import NULL, PIPE, TTY, TTY_SIZE, Ends  # noqa: F401 - process.NULL, ...
from term2acp.sandbox.output import CHUNK, NO_PIDFD, pump  # noqa: F401 - process.CHUNK

log = logging.getLogger(__name__)
logging.getLogger("sh").setLevel(logging.WARNING)  # sh logs every launch at INFO

REAP_TIMEOUT = 2.0  # bound on waiting for a killed process to be reaped
REAP_NUDGE = 0.1  # seconds after its exit before the hub is told of it again (_reap)
_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)  # loaded here, in the agent, not in the child

Exit = namedtuple("Exit", "exit_code signal")


class ProcessTimeout(Exception):
    """The command ran past its timeout; its process group has been killed."""

    def __init__(self, timeout, exit):
        super().__init__(f"timed out after {timeout:g}s")
        self.timeout = timeout
        self.exit = exit


class LaunchError(OSError):
    """The command could not be started (missing executable, bad cwd, ...)."""


class InputClosed(OSError):
    """The command no longer reads its input (it exited, or closed its stdin)."""


class _Expired(Exception):
    """Private timeout marker so an outer gevent.Timeout is never mistaken for ours."""


def run(argv, cwd=None, env=None, on_output=None, timeout=None, pass_fds=(), limits=None,
        stdin=NULL, enter=None, on_launch=None):
    """Run ``argv`` to completion and return ``Exit(exit_code, signal_name)``.

    ``on_output(bytes)`` receives stdout and stderr interleaved, in chunks of at most
    ``CHUNK`` bytes. ``stdin``: ``NULL`` (``/dev/null``) or ``TTY``. ``pass_fds`` are
    inherited by the child. ``limits`` (a ``cgroup.Limits``) caps tasks and memory (see
    ``sandbox/cgroup.py``); ``enter()`` runs in the child just before it execs (the
    session's namespaces, ``sandbox/loopback.py``); ``on_launch(pid)`` is called once it
    is started (``core/reaper.py`` records it). Raises ``ProcessTimeout`` after
    killing the group, ``LaunchError`` if it cannot start. If the calling greenlet is
    killed, the process group is SIGKILLed before it unwinds.
    """
    child = start(argv, cwd, env, on_output, pass_fds, limits, stdin, enter,
                  on_launch=on_launch)
    try:
        with gevent.Timeout(timeout, _Expired):
            outcome = child.wait()
        if child.error is not None:
            raise child.error
        return outcome
    except _Expired:
        child.kill()
        raise ProcessTimeout(timeout, child.exit) from None
    finally:
        child.kill()  # nothing when it has exited; else (cancelled) the group is killed


def start(argv, cwd=None, env=None, on_output=None, pass_fds=(), limits=None, stdin=NULL,
          enter=None, on_exit=None, on_launch=None, stderr=None, stdout=None,
          death_signal=signals.SIGKILL, counted=True):
    """Start ``argv`` and return its :class:`Process` (the arguments are ``run``'s;
    ``stdin`` may also be ``PIPE``; ``on_exit(Exit)`` is called once it has exited and
    all its output was delivered). ``stderr``, ``stdout``: descriptors of the caller's
    for them instead of the output (``stdout`` given: no output pump; its stderr goes
    there too unless ``stderr`` is given); the caller reads them and closes them after
    the start. ``death_signal``: what the kernel sends it when the agent dies (module
    docstring). ``counted``: whether it counts in :func:`live`."""
    group = limits.group() if limits else None
    ends = Ends(stdin, stdout)
    proc = None
    try:
        with spaced():  # sh holds the hub until the exec: launches leave it time between
            proc = _launch(argv, cwd, env, ends, pass_fds,
                           _in_child(limits, group, stdin, enter, death_signal), stderr)
    except BaseException:
        ends.close_all()
        if group is not None:
            group.close()
        raise
    ends.close_child()
    child = Process(proc, ends, group, on_output or _discard, on_exit, counted)
    if on_launch is not None:
        on_launch(child.pid)
    return child


_live = [0]  # started and not yet reaped, in this process (every session)


def live():
    """How many started commands (``counted``) have not been reaped yet."""
    return _live[0]


class Process:
    """A started command: a greenlet of its own pumps its output to ``on_output`` (when
    the module reads it) and reaps it once it has exited; ``write`` feeds its stdin,
    ``kill`` ends its whole group. Counted in :func:`live` from its start until it is
    reaped, unless started with ``counted=False``."""

    def __init__(self, proc, ends, group, on_output, on_exit, counted=True):
        self._counted = counted
        _live[0] += counted
        self.pid = proc.pid
        self.exit = None  # Exit, once reaped
        self.error = None  # what on_output raised (the group was killed then)
        self.exited = Event()
        self._proc, self._ends, self._group = proc, ends, group
        self._on_output, self._on_exit = on_output, on_exit
        self._pump = gevent.spawn(self._follow)
        self._pump.name = f"process-{proc.pid}"

    @property
    def running(self):
        return self.exit is None

    @property
    def input(self):
        """The descriptor its stdin is written through (``PIPE``, ``TTY``), or None."""
        return self._ends.input

    def wait(self, timeout=None):
        """The :class:`Exit` once reaped and its output delivered; None at ``timeout``."""
        self.exited.wait(timeout)
        return self.exit

    def write(self, data):
        """Write ``data`` to its stdin (cooperatively; raises :class:`InputClosed`)."""
        fd = self._ends.input
        if fd is None:
            raise InputClosed(errno.EPIPE, "the command's input is not open")
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(fd, view):]
            except BlockingIOError:
                wait_write(fd)
            except OSError as exc:  # EPIPE: nobody reads; EIO: the terminal is gone
                raise InputClosed(exc.errno, "the command no longer reads its input") from None

    def close_input(self):
        """Close its stdin (a pipe): it reads the end of its input."""
        self._ends.close_input()

    def signal(self, sig):
        """Send ``sig`` to its whole process group while it runs (not yet reaped)."""
        if self.exit is None:
            _killpg(self.pid, sig)

    def kill(self, grace=0.0, wait=True):
        """SIGKILL the whole group, reap it, release everything (bounded; idempotent);
        with ``grace``, SIGTERM to the command's processes first and SIGKILL only if they
        are still running ``grace`` seconds later. ``wait=False``: only the SIGKILL,
        without yielding (its pump reaps it)."""
        if not wait:
            if self.exit is None:
                _killpg(self.pid)
            return
        if self.exit is None and grace > 0:
            if freezer.terminate(self.pid):
                self.exited.wait(grace)
        if self.exit is None:
            _killpg(self.pid)
            if not self.exited.wait(REAP_TIMEOUT):
                log.warning("pid %s not reaped within %ss of SIGKILL", self.pid, REAP_TIMEOUT)
                self._pump.kill(block=True, timeout=1)
                self._release(_exit_of(self._proc.process.exit_code))

    def _follow(self):
        try:
            exited = os.pidfd_open(self.pid)  # readable once it has exited
        except ProcessLookupError:  # exited and reaped already
            exited = None
        except OSError:  # no pidfds here (Linux < 5.3): its output is read to end of file
            exited = NO_PIDFD
        try:
            if self._ends.output is not None:
                pump(self._ends.output, self._on_output, exited)
            elif exited is not None and exited != NO_PIDFD:  # the caller reads its output
                wait_read(exited)
        except Exception as exc:  # noqa: BLE001 - a failed consumer must not leave a zombie
            self.error = exc
            _killpg(self.pid)
        finally:
            if exited is not None and exited != NO_PIDFD:
                os.close(exited)
        code = _reap(self._proc)
        _killpg(self.pid)  # what it left in its group ends with it (the one kill policy)
        log.debug("pid %s exited with %s", self.pid, code)
        self._release(_exit_of(code))

    def _release(self, outcome):
        if self.exit is not None:
            return
        self.exit = outcome
        _live[0] -= self._counted
        self._ends.close_all()
        if self._group is not None:
            self._group.close()
        self.exited.set()
        if self._on_exit is not None:
            try:
                self._on_exit(outcome)
            except Exception:  # noqa: BLE001 - the process is reaped either way
                log.exception("reporting the exit of pid %s failed", self.pid)


def _killpg(pid, sig=signals.SIGKILL):
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _launch(argv, cwd, env, ends, pass_fds, preexec, stderr=None):
    """Start the command with the unpatched ``os.close`` (see the module docstring)."""
    original = monkey.get_original("os", "close")
    # what to put back: gevent's close, even if a launch in another greenlet is between
    # its swap and its restore (sh may yield in the parent while it starts its threads)
    patched = gevent.os.close if monkey.is_object_patched("os", "close") else original
    os.close = original
    try:
        command = sh.Command(argv[0])
        # sh encodes arguments strictly with _encoding; as latin-1 text they come out as
        # the exact bytes of the path, so non-UTF-8 names (surrogate-escaped) pass intact
        args = [os.fsencode(arg).decode("latin-1") for arg in argv[1:]]
        return command(*args, _cwd=cwd, _env=env, _in=ends.child_in, _out=ends.child_out,
                       _err=ends.child_out if stderr is None else stderr, _bg=True,
                       _bg_exc=False, _new_session=True, _pass_fds=set(pass_fds),
                       _preexec_fn=preexec, _encoding="latin-1")
    except sh.CommandNotFound as exc:
        code = errno.EACCES if os.sep in argv[0] and os.path.exists(argv[0]) else errno.ENOENT
        raise LaunchError(code, f"command not found: {exc} ({os.strerror(code)})") from None
    except sh.ForkException as exc:
        raise LaunchError(errno.EINVAL, f"cannot start {argv[0]}: {_last_line(exc)}") from None
    finally:
        os.close = patched


def _in_child(limits, group, stdin, enter, death_signal=signals.SIGKILL):
    """The pre-exec hook: limits, the terminal, the namespaces, then the death signal
    (last: joining a user namespace changes credentials, which may clear it; one the
    program handles stays blocked until it unblocks it)."""
    parent = os.getpid()

    def prepare():
        if limits is not None:
            limits.apply_in_child(group)
        if stdin == TTY:  # sh made a new session; its terminal becomes this one's
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        if enter is not None:
            enter()
        if death_signal != signals.SIGKILL:
            signals.pthread_sigmask(signals.SIG_BLOCK, {death_signal})
        _libc.prctl(_PR_SET_PDEATHSIG, death_signal, 0, 0, 0)
        if os.getppid() != parent:  # the agent died before the signal was armed
            os._exit(1)
    return prepare


def _reap(proc):
    """The exit code of the exited command (:func:`_wait`). The hub's child watcher can
    miss the SIGCHLD of a command that ended at once; once a short while has passed the
    hub is sent one more (it then reaps every exited child)."""
    waiter = gevent.spawn(_wait, proc)
    try:
        waiter.join(REAP_NUDGE)
        while not waiter.ready():
            os.kill(os.getpid(), signals.SIGCHLD)
            waiter.join(REAP_NUDGE)
        return waiter.get()
    finally:
        waiter.kill(block=False)


def _wait(proc):
    """The exit code as sh reports it: negative for a signal."""
    try:
        proc.wait()
    except sh.ErrorReturnCode as exc:
        return exc.exit_code
    return proc.process.exit_code


def _exit_of(code):
    if code is None:
        return Exit(None, "SIGKILL")
    if code < 0:
        return Exit(None, signals.Signals(-code).name)
    return Exit(code, None)


def _discard(_data):
    pass


def _last_line(exc):
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[-1] if lines else "fork failed"
