"""sandbox/process.py under the monkey-patched runtime: launch, stream, time out, cancel."""

import os
import signal
import time

import gevent
import gevent.event
import pytest
from gevent import monkey

from term2acp.sandbox import cgroup, process
from tests.unit.sandbox.support import host_pids_with, wait_until
from tests.support.clock import within


class Cancelled(gevent.GreenletExit):
    """What a turn cancellation looks like to a tool greenlet."""


def test_runs_under_patched_gevent():
    import socket

    assert monkey.is_module_patched("socket")
    assert socket.socket is gevent.socket.socket
    assert os.close is not monkey.get_original("os", "close")  # the patched close sh hits


def test_exit_code_and_interleaved_output():
    out = bytearray()
    result = process.run(["/bin/sh", "-c", "echo out; echo err >&2; exit 3"],
                         on_output=out.extend, timeout=10)
    assert result == process.Exit(3, None)
    assert out.decode().split() == ["out", "err"]


def test_signal_is_reported_by_name():
    result = process.run(["/bin/sh", "-c", "kill -TERM $$"], timeout=10)
    assert result == process.Exit(None, "SIGTERM")


def test_stdin_is_dev_null():
    out = bytearray()
    result = process.run(["/bin/sh", "-c", "cat; echo done"], on_output=out.extend, timeout=10)
    assert result.exit_code == 0 and out == b"done\n"


def test_env_and_cwd(tmp_path):
    out = bytearray()
    process.run(["/bin/sh", "-c", 'echo "$ONLY:$(pwd)"'], cwd=str(tmp_path),
                env={"ONLY": "yes", "PATH": "/usr/bin:/bin"}, on_output=out.extend, timeout=10)
    assert out.decode().strip() == f"yes:{tmp_path}"


def test_missing_command_is_a_launch_error():
    with pytest.raises(process.LaunchError):
        process.run(["/nonexistent/command-xyz"], timeout=10)


def test_small_writes_are_coalesced_and_chunks_bounded():
    sizes = []
    script = "i=0; while [ $i -lt 3000 ]; do echo $i; i=$((i+1)); done; head -c 300000 /dev/zero"
    process.run(["/bin/sh", "-c", script], on_output=lambda d: sizes.append(len(d)), timeout=30)
    assert sum(sizes) == sum(len(f"{i}\n") for i in range(3000)) + 300000
    assert max(sizes) <= process.CHUNK
    assert len(sizes) < 60  # 3000 echo writes and 300 kB arrive as a handful of chunks


def test_timeout_kills_the_group_and_raises():
    token = "424242.%d" % os.getpid()  # its own, whatever else runs on the host
    started = time.monotonic()
    with pytest.raises(process.ProcessTimeout) as info:
        process.run(["/bin/sh", "-c", f"trap '' TERM; sleep {token} & sleep {token}"],
                    timeout=0.5)
    assert time.monotonic() - started < within(3)
    assert info.value.exit.signal == "SIGKILL"
    assert wait_until(lambda: not host_pids_with(token), timeout=2)


def test_cancelling_the_greenlet_kills_the_group_promptly():
    token = "424243.%d" % os.getpid()
    ready = gevent.event.Event()

    def on_output(data):
        if b"ready" in data:
            ready.set()

    script = f"trap '' TERM HUP; sleep {token} & echo ready; wait"
    worker = gevent.spawn(process.run, ["/bin/sh", "-c", script], on_output=on_output,
                          timeout=60)
    assert ready.wait(timeout=10)
    assert host_pids_with(token)
    started = time.monotonic()
    worker.kill(Cancelled, block=True, timeout=5)
    assert worker.dead
    # promptly: no grace for a group that ignores TERM (it would hold the call for good)
    assert time.monotonic() - started < within(1.0)
    assert isinstance(worker.value, Cancelled)
    assert wait_until(lambda: not host_pids_with(token), timeout=1)


def test_an_exit_is_noticed_while_a_process_it_left_holds_the_output():
    """A command run outside the sandbox that leaves a process behind holding its output
    (``server &``): its exit is noticed at once, not when that process ends or the
    deadline fires, what it wrote before is delivered, and what it left in its process
    group ends with it."""
    token = "424244.%d" % os.getpid()
    out = bytearray()
    started = time.monotonic()
    result = process.run(["/bin/sh", "-c", f"sleep {token} & echo started; exit 4"],
                         on_output=out.extend, timeout=60)
    assert result == process.Exit(4, None)
    assert time.monotonic() - started < within(5)  # not the 60 s deadline, nor the sleep
    assert out == b"started\n"
    assert wait_until(lambda: not host_pids_with(token), timeout=2)


def test_other_greenlets_keep_running_while_waiting():
    ticks = []

    def tick():
        while True:
            gevent.sleep(0.01)
            ticks.append(1)

    ticker = gevent.spawn(tick)
    try:
        process.run(["/bin/sh", "-c", "sleep 0.3"], timeout=10)
    finally:
        ticker.kill()
    assert len(ticks) >= 10


def test_pids_group_caps_forks():
    if not cgroup.RunGroup.supported():
        pytest.skip("no writable pids cgroup on this machine")
    out = bytearray()
    script = "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do sleep 0.5 & done; wait"
    result = process.run(["/bin/sh", "-c", script], on_output=out.extend, timeout=20,
                         limits=cgroup.Limits(pids_max=6))
    assert result.exit_code is not None
    assert b"fork" in out.lower()
    parent = cgroup.RunGroup._parent
    ours = {os.path.join(parent, d) for d in os.listdir(parent)
            if d.startswith(f"run-{os.getpid()}-")}
    assert ours <= cgroup.RunGroup._stale  # removed, or queued for removal


def test_memory_limit_applies_to_the_child_only():
    out = bytearray()
    script = "python3 -c \"b = bytearray(300 << 20); print('ALLOCATED')\""
    result = process.run(["/bin/sh", "-c", script], on_output=out.extend, timeout=30,
                         limits=cgroup.Limits(memory_bytes=128 << 20))
    assert result.exit_code != 0 and b"ALLOCATED" not in out
    big = bytearray(300 << 20)  # the agent itself is not limited
    assert len(big) == 300 << 20


def test_arguments_pass_as_exact_bytes_even_when_not_utf8(tmp_path):
    name = os.fsdecode(b"caf\xe9-\xff")  # surrogate-escaped, as os.listdir returns it
    out = bytearray()
    result = process.run(["/bin/sh", "-c", 'printf %s "$1"', "sh", name, "ünïcode"],
                         on_output=out.extend, timeout=10)
    assert result.exit_code == 0 and out == b"caf\xe9-\xff"
    out.clear()
    process.run(["/bin/echo", "ünïcode"], on_output=out.extend, timeout=10)
    assert out == "ünïcode\n".encode()


def _dead_lifeline(monkeypatch, bwrap):
    """A lifeline whose writer is gone (closed at once: gevent's own ``os.close`` of a pipe
    waits for the hub's next turn)."""
    read, write = os.pipe()
    os.set_inheritable(read, True)
    monkeypatch.setattr(bwrap, "_lifeline", [(read, write, os.getpid())])
    return read, write


def test_a_sandboxed_command_runs_nothing_once_the_agent_is_gone(monkeypatch):
    """The agent's lifeline at end of file (as when the agent died while the sandbox
    appeared): the command is not run. With the lifeline open, it is."""
    from term2acp.sandbox import bwrap
    from tests.unit.sandbox.support import HostTree

    if not bwrap.probe().available:
        pytest.skip("no sandbox")
    tree = HostTree()
    try:
        read, write = _dead_lifeline(monkeypatch, bwrap)
        monkey.get_original("os", "close")(write)  # nobody writes any more: the agent is gone
        result = bwrap.run(["/bin/sh", "-c", "touch ran"], tree.root, tree.settings(),
                           timeout=30)
        assert result.exit_code == 125 and not os.path.exists(tree.path("ws", "ran"))
        os.close(read)
        monkeypatch.setattr(bwrap, "_lifeline", [])  # this agent's own, open
        result = bwrap.run(["/bin/sh", "-c", "touch ran; exit 7"], tree.root, tree.settings(),
                           timeout=30)
        assert result.exit_code == 7 and os.path.exists(tree.path("ws", "ran"))
    finally:
        tree.cleanup()


def test_a_running_sandbox_ends_when_the_agents_lifeline_does(monkeypatch):
    """Whatever became of bubblewrap's parent-death signals, a command already running (and
    what it started) is killed when the agent's lifeline reaches end of file."""
    from term2acp.sandbox import bwrap
    from tests.unit.sandbox.support import HostTree

    if not bwrap.probe().available:
        pytest.skip("no sandbox")
    tree = HostTree()
    token = "97.%d" % os.getpid()
    try:
        read, write = _dead_lifeline(monkeypatch, bwrap)
        ended = gevent.event.AsyncResult()
        child = bwrap.start(["/bin/sh", "-c", f"sleep {token}0 & sleep {token}1; echo late"],
                            tree.root, tree.settings(), on_exit=ended.set)
        assert wait_until(lambda: len(host_pids_with(f"{token}1")) > 0, timeout=10)
        monkey.get_original("os", "close")(write)
        ended.get(timeout=10)
        left = lambda: host_pids_with(f"{token}0") + host_pids_with(f"{token}1")  # noqa: E731
        assert wait_until(lambda: not left(), timeout=10), left()
        child.kill()
        os.close(read)
    finally:
        tree.cleanup()


def test_capture_keeps_stdout_and_stderr_apart_and_feeds_stdin():
    from term2acp.sandbox.capture import capture

    data = b"x" * 300_000  # more than a pipe holds: written while the output is read
    exit, out, err = capture(["/bin/sh", "-c", "cat; echo err >&2; exit 2"], data=data,
                             timeout=20)
    assert exit == process.Exit(2, None) and out == data and err == b"err\n"
    with pytest.raises(process.ProcessTimeout):
        capture(["/bin/sh", "-c", "sleep 30"], timeout=0.2)


def test_without_pidfds_the_output_is_read_to_its_end(monkeypatch):
    """A kernel without pidfds (Linux < 5.3): the exit is not watched apart, the output is
    read to end of file as before, all of it."""
    import errno

    def no_pidfd(pid):
        raise OSError(errno.ENOSYS, "pidfd_open")
    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    out = bytearray()
    result = process.run(["/bin/sh", "-c", "head -c 300000 /dev/zero; echo end"],
                         on_output=out.extend, timeout=20)
    assert result == process.Exit(0, None)
    assert len(out) == 300_004 and out.endswith(b"end\n")



def _read_all(fd, data):
    os.set_blocking(fd, False)
    while True:
        gevent.socket.wait_read(fd)
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            continue
        if not chunk:
            os.close(fd)
            return
        data += chunk


def test_a_program_whose_stdout_and_stderr_the_caller_reads_apart():
    """What the MCP stdio servers get: stdin a pipe written to, stdout and stderr pipes of
    the caller's (no output pump), SIGTERM to the group, and not counted in live()."""
    out, err = os.pipe(), os.pipe()
    before = process.live()
    child = process.start(["/bin/sh", "-c", "trap 'echo term; exit 7' TERM; echo out; "
                           "echo err >&2; read x; echo got $x; while :; do sleep 0.05; done"],
                          stdin=process.PIPE, stdout=out[1], stderr=err[1], counted=False)
    os.close(out[1])
    os.close(err[1])
    assert process.live() == before
    child.write(b"hi\n")
    said, told = bytearray(), bytearray()
    readers = [gevent.spawn(_read_all, out[0], said), gevent.spawn(_read_all, err[0], told)]
    assert wait_until(lambda: b"got hi" in said, within(10))
    child.signal(signal.SIGTERM)
    assert child.wait(within(10)) == process.Exit(7, None)
    gevent.joinall(readers, timeout=within(10))
    assert said == b"out\ngot hi\nterm\n"
    assert told.startswith(b"err\n")  # then the shell's word on its killed sleep
    child.signal(signal.SIGTERM)  # reaped: nothing to signal, no error
