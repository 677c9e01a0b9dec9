"""sessions/takeover.py against a real lock held by another process."""

import os
import subprocess
import sys

import pytest

from term2acp.sessions import takeover
from term2acp.sessions.errors import SessionLocked
from term2acp.sessions.live import SessionLock

# holds the session's lock with its pid written, as a live agent does; on SIGUSR2 it lets
# go only when told to (argv[2] == "yields"), like an agent whose hub is stuck otherwise
HOLDER = r"""
import fcntl, os, signal, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
os.ftruncate(fd, 0); os.pwrite(fd, str(os.getpid()).encode(), 0)
def let_go(*_):
    fcntl.flock(fd, fcntl.LOCK_UN)
signal.signal(signal.SIGUSR2, let_go if sys.argv[2] == "yields" else signal.SIG_IGN)
print("held", flush=True)
while True:
    time.sleep(60)
"""


@pytest.fixture
def holder(tmp_path):
    procs = []

    def start(behaviour):
        path = tmp_path / "s1.lock"
        proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), behaviour],
                                stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout.readline() == "held\n"
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def attach(tmp_path):
    lock = SessionLock(str(tmp_path), "s1")
    return lambda: (lock.acquire(), lock)[1]


def test_a_holder_that_lets_go_hands_the_session_over(tmp_path, holder):
    proc = holder("yields")
    with pytest.raises(SessionLocked) as locked:
        attach(tmp_path)()
    lock = takeover.take(str(tmp_path), "s1", locked.value.args[0], attach(tmp_path), wait=10)
    assert lock.fd is not None
    assert open(tmp_path / "s1.lock").read() == str(os.getpid())
    assert not os.path.exists(takeover.request_path(str(tmp_path), "s1"))  # cleaned up
    lock.release()
    assert proc.poll() is None  # asked, not killed


def test_a_holder_that_does_not_let_go_leaves_it_locked_with_the_wait_named(tmp_path, holder):
    proc = holder("stuck")
    with pytest.raises(SessionLocked) as locked:
        takeover.take(str(tmp_path), "s1", str(proc.pid), attach(tmp_path), wait=0.3)
    assert locked.value.args == (str(proc.pid), 0.3)
    assert not os.path.exists(takeover.request_path(str(tmp_path), "s1"))


def test_the_request_names_the_asking_process(tmp_path):
    takeover._write(takeover.request_path(str(tmp_path), "s1"), "4242")
    assert takeover.requested(str(tmp_path), "s1") == 4242
    assert takeover.requested(str(tmp_path), "other") is None


def test_a_lock_file_without_a_pid_is_not_signalled(monkeypatch):
    sent = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: sent.append((pid, sig)))
    for holder in ("?", "", "1", str(os.getpid())):
        takeover._signal(holder)
    assert sent == []
