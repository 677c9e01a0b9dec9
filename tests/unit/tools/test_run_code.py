"""run_code: a Python snippet in the sandbox, nested tool calls over the inherited socket."""

import os
import time

import gevent
import pytest

from term2acp.core.events import TerminalExited, TerminalStarted
from term2acp.sandbox import bwrap
from term2acp.tools.base import ToolError, ToolResult
from term2acp.tools.run_code import MAX_CALLS, RunCodeTool
from tests.unit.sandbox.support import HostTree, marker, needs_sandbox
from tests.support.clock import within

sandboxed = needs_sandbox()


@pytest.fixture
def tree():
    tree = HostTree()
    yield tree
    tree.cleanup()


class FakeTools:
    """Stands in for the turn's nested call: records calls, answers like real tools."""

    def __init__(self):
        self.calls = []

    def __call__(self, name, arguments):
        self.calls.append((name, arguments))
        gevent.sleep(0)  # a real nested call yields (approvals, I/O)
        if name == "read_file":
            return ToolResult(f"contents of {arguments.get('path')}")
        if name == "fails":
            raise ToolError("fails always fails")
        if name == "soft_error":
            return ToolResult("no such file", is_error=True)
        return ToolResult("ok")


def call(tree, code, events=None, settings=None, tools=None, **extra):
    tool = RunCodeTool()
    ctx = tree.context(settings, events, run_tool=tools or FakeTools())
    return tool.run(tool.load({"code": code, **extra}), ctx)


def test_shape():
    tool = RunCodeTool()
    assert tool.name == "run_code" and tool.kind == "execute"
    assert tool.spec()["parameters"]["required"] == ["code"]
    assert tool.approval({"code": "print(1)"}, None) is None


@sandboxed
def test_prints_and_reports_a_terminal(tree):
    events = []
    result = call(tree, "import os\nprint('hi', os.getcwd())", events)
    assert result.text == f"hi {tree.root}\nexit code 0"
    assert not result.is_error
    assert isinstance(events[0], TerminalStarted)
    assert isinstance(events[-1], TerminalExited) and events[-1].exit_code == 0


@sandboxed
def test_nested_calls_return_text_and_raise_errors(tree):
    tools = FakeTools()
    code = """
print(tools.read_file(path="a.txt"))
print(tools.call("read_file", {"path": "b.txt"}))
for name in ("fails", "soft_error"):
    try:
        getattr(tools, name)()
    except ToolCallError as exc:
        print("error:", exc)
"""
    result = call(tree, code, tools=tools)
    assert result.text.splitlines() == ["contents of a.txt", "contents of b.txt",
                                        "error: fails always fails", "error: no such file",
                                        "exit code 0"]
    assert tools.calls == [("read_file", {"path": "a.txt"}), ("read_file", {"path": "b.txt"}),
                           ("fails", {}), ("soft_error", {})]


@sandboxed
def test_shell_and_run_code_are_refused(tree):
    tools = FakeTools()
    code = """
for name in ("shell", "run_code"):
    try:
        tools.call(name, {"command": "touch pwned", "code": "1"})
    except ToolCallError as exc:
        print(exc)
"""
    result = call(tree, code, tools=tools)
    assert "shell cannot be called from run_code" in result.text
    assert "run_code cannot be called from run_code" in result.text
    assert tools.calls == []


@sandboxed
def test_at_most_200_nested_calls(tree):
    tools = FakeTools()
    code = f"""
done = failed = 0
for _ in range({MAX_CALLS + 5}):
    try:
        tools.noop()
        done += 1
    except ToolCallError as exc:
        failed += 1
        last = str(exc)
print(done, failed, last)
"""
    result = call(tree, code, tools=tools)
    assert result.text.startswith(f"{MAX_CALLS} 5 run_code allows at most {MAX_CALLS}")
    assert len(tools.calls) == MAX_CALLS


@sandboxed
def test_snippet_is_sandboxed(tree):
    name = marker()
    code = f"""
for path in ("/etc/{name}", "{tree.path('sibling', name)}"):
    try:
        open(path, "w").write("pwned")
    except OSError as exc:
        print("denied", exc.errno)
open("inside.txt", "w").write("fine")
"""
    result = call(tree, code)
    assert result.text.count("denied") == 2
    assert not os.path.exists(f"/etc/{name}")
    assert not os.path.exists(tree.path("sibling", name))
    assert os.path.exists(os.path.join(tree.root, "inside.txt"))


@sandboxed
def test_exception_fails_the_call_with_a_traceback(tree):
    result = call(tree, "raise ValueError('boom')")
    assert result.is_error
    assert "ValueError: boom" in result.text and result.text.endswith("exit code 1")


@sandboxed
def test_timeout_kills_the_snippet(tree):
    started = time.monotonic()
    result = call(tree, "while True:\n    pass", timeout=0.5)
    assert time.monotonic() - started < within(5)
    assert result.is_error and "timed out after 0.5s" in result.text


@sandboxed
def test_output_is_capped(tree):
    result = call(tree, "print('x' * 200000)", settings=tree.settings(output_cap=500))
    assert "bytes of output cut" in result.text and len(result.text) < 700


def test_unavailable_sandbox_refuses(tree, monkeypatch):
    monkeypatch.setenv(bwrap.BWRAP_ENV, "/nonexistent/bwrap")
    tools = FakeTools()
    with pytest.raises(ToolError, match="sandbox unavailable"):
        call(tree, "tools.noop()", tools=tools)
    assert tools.calls == []


class Cancelled(gevent.GreenletExit):
    """A turn cancellation as the tool greenlet sees it."""


@sandboxed
def test_cancel_during_a_nested_call_kills_everything(tree):
    entered, never = gevent.event.Event(), gevent.event.Event()

    def blocking(name, arguments):
        entered.set()
        never.wait(timeout=60)
        return ToolResult("late")

    events = []
    worker = gevent.spawn(call, tree, "tools.slow()\nprint('unreachable')", events,
                          tools=blocking)
    assert entered.wait(timeout=10)
    started = time.monotonic()
    worker.kill(Cancelled, block=True, timeout=5)
    assert worker.dead and isinstance(worker.value, Cancelled)
    assert time.monotonic() - started < within(1.0)  # promptly: not after the tool's 60 s
    assert isinstance(events[-1], TerminalExited) and events[-1].signal == "SIGKILL"


@sandboxed
def test_nested_calls_from_snippet_threads_are_serialised(tree):
    tools = FakeTools()
    code = """
import threading
results = []
def work(i):
    results.append(tools.read_file(path=f"{i}.txt"))
threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
[t.start() for t in threads]
[t.join() for t in threads]
print(sorted(results) == sorted(f"contents of {i}.txt" for i in range(8)))
"""
    result = call(tree, code, tools=tools)
    assert result.text == "True\nexit code 0"
    assert len(tools.calls) == 8
