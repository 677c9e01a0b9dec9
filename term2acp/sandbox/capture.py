"""A command run outside the sandbox for what it prints, through ``process.py`` (the one
module that starts child processes): its stdout and its stderr kept apart, its stdin the
given bytes. The agent's own helpers use it (``turns/snapshots.py``'s git)."""

import os

import gevent
from gevent.socket import wait_read

from term2acp.sandbox import process


class _Expired(Exception):
    """Private timeout marker so an outer gevent.Timeout is never mistaken for ours."""


def capture(argv, cwd=None, env=None, data=None, timeout=None):
    """Run ``argv`` to completion; returns ``(Exit, stdout bytes, stderr bytes)``. ``data``:
    its stdin (None: ``/dev/null``). Raises ``process.ProcessTimeout`` after ``timeout``
    seconds (its group killed) and ``process.LaunchError`` when it cannot start; a killed
    caller kills it."""
    out, err = bytearray(), bytearray()
    err_read, err_write = os.pipe()
    try:
        child = process.start(argv, cwd, env, out.extend,
                              stdin=process.NULL if data is None else process.PIPE,
                              stderr=err_write)
    except BaseException:
        os.close(err_read)
        raise
    finally:
        os.close(err_write)
    reader = gevent.spawn(_drain, err_read, err)
    try:
        with gevent.Timeout(timeout, _Expired):
            if data is not None:
                try:
                    child.write(data)
                except process.InputClosed:
                    pass  # it reads no more: its exit says how it went
                child.close_input()
            outcome = child.wait()
            reader.join()
        return outcome, bytes(out), bytes(err)
    except _Expired:
        child.kill()
        raise process.ProcessTimeout(timeout, child.exit) from None
    finally:
        child.kill()
        reader.kill()
        os.close(err_read)


def _drain(fd, into):
    os.set_blocking(fd, False)
    while True:
        wait_read(fd)
        try:
            chunk = os.read(fd, process.CHUNK)
        except BlockingIOError:
            continue
        if not chunk:
            return
        into += chunk
