"""Issue 23: the agent leaves no term2acp-* folder in the system temp directory, and sweeps
the folders of earlier agents that were killed."""

import os
import shutil
import subprocess
import sys

import pytest

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None and not os.environ.get("CI"),
                                 reason="bubblewrap is not installed")


def leftovers(folder):
    return sorted(name for name in os.listdir(folder) if name.startswith("term2acp-"))


@needs_bwrap
def test_no_scratch_folder_is_left_after_exit_and_dead_ones_are_swept(acp_agent, acp_workspace,
                                                                      tmp_path):
    temp = tmp_path / "systemp"
    temp.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a pid that no longer runs: an agent killed with SIGKILL left this
    (temp / f"term2acp-{dead.pid}-abcd1234" / "sessions-x").mkdir(parents=True)
    turns = [[{"tool_call": {"name": "shell", "arguments": {"command": "echo in-sandbox"}}}],
             [{"text": "done"}]]
    # its own process (cwd given): the temp directory is read at start-up
    agent = acp_agent(turns=turns, env={"TMPDIR": str(temp)}, cwd=acp_workspace)
    sid = agent.new_session(acp_workspace)
    _, _, idle = agent.prompt(sid, "go", timeout=60)
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    [only] = leftovers(temp)  # the dead agent's folder was swept; this agent's is there
    assert only.startswith(f"term2acp-{agent.proc.pid}-")
    assert agent.close() == 0
    assert leftovers(temp) == []
