"""The take-over request is read safely, through the launcher: a FIFO put at a session's
request path, then SIGUSR2, neither blocks the holder's hub nor takes its session."""

import os
import signal

import pytest


@pytest.mark.acp_process
def test_a_fifo_at_the_request_path_does_not_block_the_holder(acp_agent, acp_workspace,
                                                              acp_env):
    agent = acp_agent(turns=[[{"text": "one"}], [{"text": "two"}]])
    sid = agent.new_session(acp_workspace)
    agent.prompt(sid, "first")
    request = os.path.join(acp_env["TERM2ACP_HOME"], "locks", f"{sid}.takeover")
    os.mkfifo(request, 0o600)
    agent.proc.send_signal(signal.SIGUSR2)
    assert agent.wait_stderr("not a regular file of this user")
    listed = agent.request("session/list", {}, timeout=5)["result"]["sessions"]
    assert [s["sessionId"] for s in listed] == [sid]
    _, _, idle = agent.prompt(sid, "second", timeout=10)  # still its session
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    assert agent.close() == 0


@pytest.mark.acp_process
@pytest.mark.skipif(os.getuid() != 0, reason="making a file of another user needs root")
def test_a_request_file_of_another_user_is_ignored(acp_agent, acp_workspace, acp_env):
    agent = acp_agent(turns=[[{"text": "one"}], [{"text": "two"}]])
    sid = agent.new_session(acp_workspace)
    agent.prompt(sid, "first")
    request = os.path.join(acp_env["TERM2ACP_HOME"], "locks", f"{sid}.takeover")
    with open(request, "w") as fh:
        fh.write(str(os.getpid()))
    os.chown(request, 65534, 65534)
    agent.proc.send_signal(signal.SIGUSR2)
    assert agent.wait_stderr("not a regular file of this user")
    _, _, idle = agent.prompt(sid, "second", timeout=10)  # still its session
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    assert agent.close() == 0
