"""Background processes in process (tools/processes.py): the unread buffer cut in the
middle, limits and unknown ids as tool errors, input, kill, the session's close."""

import uuid

import pytest

from term2acp.core.events import TerminalExited, TerminalStarted
from term2acp.tools.base import ToolError
from term2acp.tools.output import Capture
from term2acp.tools.processes import ShellKillTool, ShellOutputTool
from term2acp.tools.shell import ShellTool
from term2acp.tools.shell_state import SessionShell
from tests.unit.sandbox.support import HostTree, host_pids_with, needs_sandbox, wait_until


@pytest.fixture
def tree():
    tree = HostTree()
    yield tree
    tree.cleanup()


class Session:
    """Calls of one session (its own shell, so its processes are its own); closed after."""

    def __init__(self, tree, **shell):
        self.tree, self.events = tree, []
        self.settings = tree.settings(**shell)
        self.id = f"s-{uuid.uuid4().hex[:8]}"
        self.shell = SessionShell()

    def call(self, tool, **arguments):
        ctx = self.tree.context(self.settings, self.events, shell=self.shell)
        return tool.run(tool.load(arguments), ctx)

    def close(self):
        self.shell.close()


@pytest.fixture
def session(tree):
    made = []

    def make(**shell):
        made.append(Session(tree, **shell))
        return made[-1]
    yield make
    for one in made:
        one.close()


def test_a_capture_cut_in_the_middle_says_how_much():
    capture = Capture(1000)
    capture.add(b"a" * 600 + b"b" * 900)
    text = capture.text()
    assert text.startswith("a" * 500) and text.endswith("b" * 500)
    assert "[... 500 bytes of output cut; showing the first 500 and the last 500 bytes ...]" in text
    narrower = capture.text(limit=100)
    assert narrower.startswith("a" * 50 + "\n[... 1,400 bytes") and narrower.endswith("b" * 50)
    whole = Capture(1000)
    whole.add(b"x" * 50 + b"y" * 50)
    assert whole.text(limit=10) == "xxxxx\n[... 90 bytes of output cut; showing the first 5 " \
                                   "and the last 5 bytes ...]\nyyyyy"


def test_tools_shape():
    spec = ShellTool().spec()["parameters"]
    assert "sandbox" not in spec["properties"]
    assert spec["properties"]["background"]["type"] == "boolean"
    assert spec["properties"]["tty"]["type"] == "boolean"
    assert ShellOutputTool().spec()["parameters"]["required"] == ["process_id"]
    assert ShellKillTool().spec()["parameters"]["required"] == ["process_id"]
    assert ShellOutputTool().kind == ShellKillTool().kind == "execute"


@needs_sandbox()
def test_unread_output_is_bounded_and_cut_in_the_middle(tree, session):
    one = session(process_output_kb=4)
    script = "head -c 3000 /dev/zero | tr '\\0' a; head -c 20000 /dev/zero | tr '\\0' b; echo END"
    started = one.call(ShellTool(), command=script, background=True, wait_seconds=20)
    text = started.text + one.call(ShellOutputTool(), process_id="p1", wait_seconds=20).text
    assert "a" * 2048 in text and "b" * 2000 + "END" in text
    assert "bytes of output cut" in text and "exited with code 0" in text
    kinds = [type(e) for e in one.events]
    assert kinds[0] is TerminalStarted and kinds[-1] is TerminalExited


@needs_sandbox()
def test_limits_and_unknown_ids_are_tool_errors(tree, session):
    one = session(max_processes=2)
    for _ in range(2):
        one.call(ShellTool(), command="sleep 60.5151", background=True)
    with pytest.raises(ToolError, match=r"2 background processes are already running in this "
                                        r"session \(p1, p2\)"):
        one.call(ShellTool(), command="sleep 60.5151", background=True)
    with pytest.raises(ToolError, match="no background process 'p7'.*known: p1, p2"):
        one.call(ShellOutputTool(), process_id="p7")
    killed = one.call(ShellKillTool(), process_id="p1")
    # SIGTERM first (sleep ends on it: 143); SIGKILL when it had not started to run yet
    assert ("exited with code 143" in killed.text or "killed by signal SIGKILL" in killed.text)
    assert killed.raw_output["running"] is False
    assert "p3" in one.call(ShellTool(), command="true", background=True, wait_seconds=10).text
    with pytest.raises(ToolError, match="no background process 'p1'"):
        one.call(ShellKillTool(), process_id="p1")  # a killed process is forgotten
    other = session()
    with pytest.raises(ToolError, match="no background process 'p2'"):
        other.call(ShellOutputTool(), process_id="p2")  # another session's


@needs_sandbox()
def test_input_to_a_pipe_and_the_session_close_ends_everything(tree, session):
    one = session()
    token = "60.5252"
    one.call(ShellTool(), command=f"sleep {token} & while read l; do echo got $l; done",
             background=True)
    read = one.call(ShellOutputTool(), process_id="p1", input="one\n", wait_seconds=20)
    assert "got one" in read.text and "is running" in read.text
    assert one.call(ShellOutputTool(), process_id="p1").text.startswith("(no new output)")
    assert host_pids_with(token)
    one.close()
    assert wait_until(lambda: not host_pids_with(token), timeout=2)
    assert isinstance(one.events[-1], TerminalExited) and one.events[-1].signal == "SIGKILL"


@needs_sandbox()
def test_input_to_an_exited_process_is_refused_with_its_output(tree, session):
    one = session()
    one.call(ShellTool(), command="echo bye", background=True, wait_seconds=20)
    with pytest.raises(ToolError, match="exited with code 0. It reads no more input"):
        one.call(ShellOutputTool(), process_id="p1", input="x\n")
    ended = one.call(ShellKillTool(), process_id="p1")
    assert ended.text.startswith("It had already ended.") and "exited with code 0" in ended.text


@needs_sandbox()
def test_background_takes_no_timeout_and_foreground_no_wait(tree, session):
    one = session()
    with pytest.raises(ToolError, match="timeout does not apply"):
        one.call(ShellTool(), command="true", background=True, timeout=5)
    with pytest.raises(ToolError, match="wait_seconds applies to background"):
        one.call(ShellTool(), command="true", wait_seconds=5)
