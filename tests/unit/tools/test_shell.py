"""The shell tool: sandboxed runs, streaming, caps, timeouts, cancellation, refusal."""

import os
import resource
import time

import gevent
import pytest

from term2acp.core.events import TerminalExited, TerminalOutput, TerminalStarted
from term2acp.sandbox import bwrap, cgroup, process
from term2acp.tools.base import ToolError
from term2acp.tools.shell import Capture, ShellTool
from tests.unit.sandbox.support import (HostTree, host_pids_with, marker, naming, needs_sandbox,
                                        wait_until)
from tests.support.clock import within

sandboxed = needs_sandbox()


class Cancelled(gevent.GreenletExit):
    """A turn cancellation as the tool greenlet sees it."""


@pytest.fixture
def tree():
    tree = HostTree()
    yield tree
    tree.cleanup()


def call(tree, events=None, settings=None, **arguments):
    tool = ShellTool()
    return tool.run(tool.load(arguments), tree.context(settings, events))


def output_of(events):
    return b"".join(e.data for e in events if isinstance(e, TerminalOutput))


def test_shape():
    tool = ShellTool()
    spec = tool.spec()
    assert tool.name == "shell" and tool.kind == "execute"
    assert spec["parameters"]["required"] == ["command"]
    assert spec["parameters"]["properties"]["timeout"]["type"] == "number"
    assert spec["parameters"]["properties"]["network"]["type"] == "boolean"
    assert "sandbox" not in spec["parameters"]["properties"]  # always sandboxed
    assert tool.title({"command": "ls -la\necho more"}) == "ls -la"
    with pytest.raises(ToolError):
        tool.load({"command": ""})


@sandboxed
def test_runs_and_reports_a_terminal(tree):
    events = []
    result = call(tree, events, command="echo hello; echo oops >&2")
    started, *middle, exited = events
    assert isinstance(started, TerminalStarted) and started.cwd == tree.root
    assert started.command == "echo hello; echo oops >&2"
    assert all(isinstance(e, TerminalOutput) for e in middle)
    assert exited == TerminalExited(started.terminal_id, 0, None)
    assert output_of(events) == b"hello\noops\n"
    assert result.text == "hello\noops\nexit code 0"
    assert not result.is_error
    assert result.content == [{"type": "terminal", "terminal_id": started.terminal_id}]
    assert result.raw_output == {"exitCode": 0, "signal": None}


@sandboxed
def test_terminal_ids_are_unique(tree):
    first, second = [], []
    call(tree, first, command="true")
    call(tree, second, command="true")
    assert first[0].terminal_id != second[0].terminal_id


@sandboxed
def test_nonzero_exit_is_an_error(tree):
    result = call(tree, command="exit 3")
    assert result.is_error and result.text == "exit code 3"
    assert result.raw_output == {"exitCode": 3, "signal": None}


@sandboxed
def test_unsandboxed_request_still_runs_sandboxed(tree):
    name = marker()
    result = call(tree, command=f"echo x > {tree.path('sibling', name)}; echo ok > mine",
                  sandbox="unsandboxed")
    assert not os.path.exists(tree.path("sibling", name))
    assert os.path.exists(os.path.join(tree.root, "mine"))
    assert "No such file or directory" in result.text  # the sibling is not even visible


def test_unavailable_sandbox_refuses_and_runs_nothing(tree, monkeypatch):
    monkeypatch.setenv(bwrap.BWRAP_ENV, "/nonexistent/bwrap")
    events = []
    with pytest.raises(ToolError, match="sandbox unavailable: bubblewrap not found"):
        call(tree, events, command="touch ran", sandbox="unsandboxed")
    assert events == []
    assert not os.path.exists(os.path.join(tree.root, "ran"))


@sandboxed
def test_output_for_the_model_keeps_head_and_tail(tree):
    settings = tree.settings(output_cap=1000)
    result = call(tree, settings=settings,
                  command="echo FIRST; head -c 100000 /dev/zero | tr '\\0' x; echo; echo LAST")
    assert result.text.startswith("FIRST\n") and result.text.endswith("LAST\nexit code 0")
    assert "bytes of output cut" in result.text
    assert len(result.text) < 1200


def test_capture_is_bounded():
    capture = Capture(100)
    for _ in range(1000):
        capture.add(b"y" * 1000)
    assert capture.total == 1_000_000
    assert len(capture.head) == 50 and len(capture.tail) == 50
    assert "999,900 bytes of output cut" in capture.text()


@sandboxed
def test_timeout_is_capped_and_kills_the_tree(tree):
    token = "525252.%d" % os.getpid()  # its own, whatever else runs on the host
    settings = tree.settings(max_timeout=1.0)
    started = time.monotonic()
    script = (f"trap '' TERM HUP; (trap '' TERM HUP; exec sleep {token}) & "
              f"setsid nohup sleep {token} >/dev/null 2>&1 & echo started; wait")
    events = []
    result = call(tree, events, settings=settings, command=script, timeout=100)
    assert time.monotonic() - started < within(5)
    assert result.is_error and "timed out after 1s" in result.text
    assert "started" in result.text
    assert result.raw_output == {"exitCode": None, "signal": "SIGKILL"}
    assert events[-1].signal == "SIGKILL"
    assert wait_until(lambda: not host_pids_with(token), timeout=2)


@sandboxed
def test_output_streams_before_exit_and_cancel_kills_grandchildren(tree):
    token = "535353.%d" % os.getpid()
    events = []
    script = (f"setsid nohup sh -c 'trap \"\" TERM HUP; exec sleep {token}' >/dev/null 2>&1 & "
              f"(trap '' TERM; exec sleep {token}) & echo ready; wait")
    worker = gevent.spawn(call, tree, events, command=script, timeout=60)
    assert wait_until(lambda: b"ready" in output_of(events), timeout=10)
    assert wait_until(lambda: len(host_pids_with(token)) == 2, timeout=5)
    started = time.monotonic()
    worker.kill(Cancelled, block=True, timeout=5)
    assert time.monotonic() - started < within(1.0)  # promptly: no grace for trapped TERM
    assert isinstance(worker.value, Cancelled)
    assert isinstance(events[-1], TerminalExited) and events[-1].signal == "SIGKILL"
    assert wait_until(lambda: not host_pids_with(token), timeout=1)


@sandboxed
def test_fork_bomb_is_contained_while_others_run(tree):
    if not cgroup.RunGroup.supported():
        pytest.skip("no pids cgroup: a fork bomb would exhaust the host's pid table")
    ticks = []
    ticker = gevent.spawn(_tick, ticks)
    started = time.monotonic()
    try:
        result = call(tree, command="bomb() { bomb | bomb & }; bomb; sleep 646464.1",
                      timeout=3)
    finally:
        ticker.kill()
    assert time.monotonic() - started < within(10)
    # the pids limit made forks fail (bash reports EAGAIN), and the timeout ended the rest
    assert "Resource temporarily unavailable" in result.text
    assert result.is_error and "timed out" in result.text.lower()
    assert len(ticks) > 10
    assert wait_until(lambda: not host_pids_with("646464.1"), timeout=within(2))
    # every fork of the bomb (a pid limit's worth, each naming the script) is gone too,
    # so its output pump ends here and a loaded machine's teardown is not the next test's
    assert wait_until(lambda: not naming("646464.1"), timeout=within(10))


@sandboxed
def test_a_gigabyte_of_output_stays_bounded_while_others_run(tree):
    events, ticks = [], []
    ticker = gevent.spawn(_tick, ticks)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        result = call(tree, events, command="head -c 1073741824 /dev/zero; echo; echo END",
                      timeout=120)
    finally:
        ticker.kill()
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    assert result.text.endswith("END\nexit code 0") and "1,073,7" in result.text
    assert grown_mb < 100
    assert len(ticks) > 10
    chunks = [e for e in events if isinstance(e, TerminalOutput)]
    assert all(len(c.data) <= process.CHUNK + 64 for c in chunks)
    assert sum(len(c.data) for c in chunks) < 17 * 1024 * 1024


def _tick(ticks):
    while True:
        gevent.sleep(0.01)
        ticks.append(time.monotonic())


@sandboxed
def test_workspace_root_slash_is_refused_with_a_clear_message(tree):
    events = []
    tool = ShellTool()
    with pytest.raises(ToolError) as info:
        tool.run(tool.load({"command": "touch /ran"}), tree.context(events=events, root="/"))
    assert "workspace root is /" in str(info.value) and "bwrap" not in str(info.value)
    assert events == [] and not os.path.exists("/ran")
