"""Child processes under gevent: the one module that imports ``sh``.

``run`` launches a command in its own session (so its pid is its process group id),
streams its combined stdout/stderr to a callback in coalesced chunks, waits for it
cooperatively, and kills the whole process group when it times out or when the calling
greenlet is killed (cancellation arrives as a ``GreenletExit`` subclass).

Why the ``os.close`` swap: gevent >= 25.8 routes ``os.close`` through the hub so that
watchers on the descriptor are closed first. ``sh`` forks and then closes descriptors in
both the parent and the child; in the child there is no running hub and the deferred close
never happens (the launch hangs or fails with ``ForkException``). Nothing yields between
the fork and the return of the launch call, so swapping the original ``os.close`` in for
just that call is safe, and everything afterwards (waiting, output, kill) is cooperative.

Output is read from a pipe this module owns rather than through ``sh``'s ``_out``
callbacks: ``sh`` reads line-buffered (or 1-byte unbuffered) chunks, which is far too slow
for a gigabyte of output. Reading 64 KiB at a time and coalescing small reads keeps both
throughput and the number of callbacks sane.
"""

import errno
import fcntl
import logging
import os
import signal as signals
import time
from collections import namedtuple

import gevent
import gevent.os
import sh
from gevent import monkey
from gevent.socket import wait_read

log = logging.getLogger(__name__)
logging.getLogger("sh").setLevel(logging.WARNING)  # sh logs every launch at INFO

CHUNK = 64 * 1024  # largest chunk handed to on_output
COALESCE = 0.05  # seconds a small chunk may wait for more output
REAP_TIMEOUT = 2.0  # bound on waiting for a killed process to be reaped
_PIPE_SIZE = 1024 * 1024
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)

Exit = namedtuple("Exit", "exit_code signal")


class ProcessTimeout(Exception):
    """The command ran past its timeout; its process group has been killed."""

    def __init__(self, timeout, exit):
        super().__init__(f"timed out after {timeout:g}s")
        self.timeout = timeout
        self.exit = exit


class LaunchError(OSError):
    """The command could not be started (missing executable, bad cwd, ...)."""


class _Expired(Exception):
    """Private timeout marker so an outer gevent.Timeout is never mistaken for ours."""


class _Idle(Exception):
    """No output arrived within the coalescing window."""


def run(argv, cwd=None, env=None, on_output=None, timeout=None, pass_fds=(), limits=None):
    """Run ``argv`` to completion and return ``Exit(exit_code, signal_name)``.

    ``on_output(bytes)`` receives stdout and stderr interleaved, in chunks of at most
    ``CHUNK`` bytes. stdin is ``/dev/null``. ``pass_fds`` are inherited by the child.
    ``limits`` (a ``cgroup.Limits``) caps tasks and memory (see ``sandbox/cgroup.py``).
    Raises ``ProcessTimeout`` after killing the group, ``LaunchError`` if it cannot start.
    If the calling greenlet is killed, the process group is SIGKILLed before it unwinds.
    """
    group = limits.group() if limits else None
    read_fd, write_fd = os.pipe()
    proc = None
    try:
        _grow_pipe(write_fd)
        proc = _launch(argv, cwd, env, write_fd, pass_fds, limits, group)
        os.close(write_fd)
        write_fd = None
        return _supervise(proc, read_fd, on_output, timeout)
    finally:
        if write_fd is not None:
            os.close(write_fd)
        os.close(read_fd)
        if proc is not None and proc.process.exit_code is None:
            _kill_and_reap(proc)
        if group is not None:
            group.close()


def _supervise(proc, read_fd, on_output, timeout):
    """Pump output and wait for exit, all under one deadline."""
    try:
        with gevent.Timeout(timeout, _Expired):
            _pump(read_fd, on_output or _discard)
            code = _wait(proc)
    except _Expired:
        _kill_and_reap(proc)
        raise ProcessTimeout(timeout, _exit_of(proc.process.exit_code)) from None
    log.debug("pid %s exited with %s", proc.pid, code)
    return _exit_of(code)


def _launch(argv, cwd, env, out_fd, pass_fds, limits, group):
    """Start the command with the unpatched ``os.close`` (see the module docstring)."""
    original, patched = monkey.get_original("os", "close"), os.close
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.close = original
    try:
        command = sh.Command(argv[0])
        # sh encodes arguments strictly with _encoding; as latin-1 text they come out as
        # the exact bytes of the path, so non-UTF-8 names (surrogate-escaped) pass intact
        args = [os.fsencode(arg).decode("latin-1") for arg in argv[1:]]
        return command(*args, _cwd=cwd, _env=env, _in=devnull, _out=out_fd, _err=out_fd,
                       _bg=True, _bg_exc=False, _new_session=True, _pass_fds=set(pass_fds),
                       _preexec_fn=_in_child(limits, group), _encoding="latin-1")
    except sh.CommandNotFound as exc:
        raise LaunchError(errno.ENOENT, f"command not found: {exc}") from None
    except sh.ForkException as exc:
        raise LaunchError(errno.EINVAL, f"cannot start {argv[0]}: {_last_line(exc)}") from None
    finally:
        os.close = patched
        os.close(devnull)


def _in_child(limits, group):
    """The pre-exec hook that applies ``limits`` in the forked child, or None."""
    if limits is None:
        return None
    return lambda: limits.apply_in_child(group)


def _pump(fd, on_output):
    """Read until EOF, delivering chunks of at most CHUNK bytes, small reads coalesced."""
    gevent.os.make_nonblocking(fd)
    pending = bytearray()
    flush_at = None
    while True:
        wait = None if flush_at is None else max(0.0, flush_at - time.monotonic())
        try:
            wait_read(fd, timeout=wait, timeout_exc=_Idle)
            data = _read(fd)
        except _Idle:
            if pending:
                on_output(bytes(pending))
                pending.clear()
            flush_at = None
            continue
        if data is None:  # spurious wake-up
            continue
        if not data:
            break
        pending += data
        if flush_at is None:
            flush_at = time.monotonic() + COALESCE
        while len(pending) >= CHUNK:
            on_output(bytes(pending[:CHUNK]))
            del pending[:CHUNK]
        if not pending:
            flush_at = None
    if pending:
        on_output(bytes(pending))


def _read(fd):
    try:
        return os.read(fd, CHUNK)
    except BlockingIOError:
        return None


def _wait(proc):
    """The exit code as sh reports it: negative for a signal."""
    try:
        proc.wait()
    except sh.ErrorReturnCode as exc:
        return exc.exit_code
    return proc.process.exit_code


def _kill_and_reap(proc):
    """SIGKILL the whole process group, then reap the leader within a bound."""
    try:
        os.killpg(proc.pid, signals.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    with gevent.Timeout(REAP_TIMEOUT, False):
        _wait(proc)
    if proc.process.exit_code is None:
        log.warning("pid %s not reaped within %ss of SIGKILL", proc.pid, REAP_TIMEOUT)


def _exit_of(code):
    if code is None:
        return Exit(None, "SIGKILL")
    if code < 0:
        return Exit(None, signals.Signals(-code).name)
    return Exit(code, None)


def _grow_pipe(fd):
    try:
        fcntl.fcntl(fd, _F_SETPIPE_SZ, _PIPE_SIZE)
    except OSError:
        pass


def _discard(_data):
    pass


def _last_line(exc):
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[-1] if lines else "fork failed"
