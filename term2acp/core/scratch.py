"""The agent's scratch space in the system temp directory: one folder per process.

Every temporary folder the agent makes (the sessions' private ``/tmp``, the sandbox probe's,
the local model's socket folder) lives in ``$TMPDIR/term2acp-<pid>-<random>`` (0700),
removed when the agent exits (the server's shutdown and ``atexit``). A process killed
with SIGKILL cannot clean up, so the first use of the scratch space also removes the
folders of this user's earlier agents whose process is gone.
"""

import atexit
import os
import re
import shutil
import tempfile
import threading

PREFIX = "term2acp-"
_OURS = re.compile(rf"^{PREFIX}(\d+)-[^/]+$")
_lock = threading.Lock()
_root = [None]  # (pid, path) of this process's folder


def root():
    """This process's scratch folder, made (and stale ones swept) on first use."""
    with _lock:
        made = _root[0]
        if made is not None and made[0] == os.getpid() and os.path.isdir(made[1]):
            return made[1]
        sweep_stale()
        path = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")
        if made is None:
            atexit.register(cleanup)
        _root[0] = (os.getpid(), path)
        return path


def make(prefix):
    """A new private folder inside :func:`root`."""
    return tempfile.mkdtemp(prefix=prefix, dir=root())


def cleanup():
    """Remove this process's scratch folder (at exit; a forked child's copy of the record
    is not its own folder)."""
    with _lock:
        made = _root[0]
        if made is None or made[0] != os.getpid():
            return
        _root[0] = None
    shutil.rmtree(made[1], ignore_errors=True)


def sweep_stale(base=None):
    """Remove this user's scratch folders whose agent process no longer exists."""
    base = base or tempfile.gettempdir()
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        match = _OURS.match(name)
        if match is None or pid_alive(int(match.group(1))):
            continue
        path = os.path.join(base, name)
        try:
            if os.stat(path, follow_symlinks=False).st_uid != os.geteuid():
                continue
        except OSError:
            continue
        shutil.rmtree(path, ignore_errors=True)


def pid_alive(pid):
    """True while a process ``pid`` exists (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
