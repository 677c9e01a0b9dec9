"""session/fork and session/delete through the launcher against the fake model server, v1
and v2: the fork's next request carries the history, it has no grants and lives in the cwd
the request names; delete removes the session from session/list, its checkpoints and
files in our home, and a later resume is a precise error."""

import json
import os
import shutil
import subprocess

import pytest

from tests.e2e.test_undo import calls, srv, text  # noqa: F401 - srv is a fixture

PROTOCOLS = pytest.mark.parametrize("protocol", [2, 1])


def start(acp_agent, server, protocol, env=None):
    return acp_agent(args=("--provider", "openai", "--model", "m"), protocol=protocol,
                     env={"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "sk-t-123456",
                          **(env or {})})


def setup_params(protocol, **params):
    if protocol == 1:
        params["mcpServers"] = []
    return params


@PROTOCOLS
def test_fork_carries_the_history_into_a_new_session_in_the_named_cwd(
        acp_agent, acp_workspace, srv, tmp_path, protocol):
    other = tmp_path / "other"
    other.mkdir()
    other = os.path.realpath(other)
    srv.enqueue(text("Remembered PINEAPPLE."), text("Forked answer."), text("Original answer."))
    agent = start(acp_agent, srv, protocol)
    caps = agent.messages[0]["result"]
    advertised = caps["agentCapabilities"]["sessionCapabilities"] if protocol == 1 else \
        caps["capabilities"]["session"]
    assert advertised["fork"] == {} and advertised["delete"] == {}
    sid = agent.new_session(acp_workspace)
    agent.prompt(sid, "remember PINEAPPLE", timeout=30)
    forked = agent.request("session/fork", setup_params(protocol, sessionId=sid, cwd=other))
    assert "result" in forked, forked
    fork_id = forked["result"]["sessionId"]
    assert fork_id != sid and forked["result"]["configOptions"]
    if protocol == 1:
        assert forked["result"]["modes"]["currentModeId"] == "auto"
    agent.wait_update("available_commands_update", session_id=fork_id)
    agent.prompt(fork_id, "what was it?", timeout=30)
    sent = json.dumps(srv.requests[-1].json["messages"])
    assert "remember PINEAPPLE" in sent and "Remembered PINEAPPLE." in sent
    assert other in sent and acp_workspace not in json.dumps(srv.requests[-1].json["messages"][0])
    agent.prompt(sid, "and you?", timeout=30)  # the original goes on without the fork's turn
    assert "what was it?" not in json.dumps(srv.requests[-1].json["messages"])
    listed = agent.request("session/list", {})["result"]["sessions"]
    assert {s["sessionId"]: s["cwd"] for s in listed} == {sid: acp_workspace, fork_id: other}
    missing = agent.request("session/fork", setup_params(protocol, sessionId="nope",
                                                         cwd=acp_workspace))
    assert missing["error"]["code"] == -32002


def test_a_fork_has_no_grants_of_its_source(acp_agent, acp_workspace, srv, tmp_path):
    outside = os.path.realpath(tmp_path / "outside")
    os.makedirs(outside)
    with open(f"{outside}/n.txt", "w") as fh:
        fh.write("notes\n")
    read = calls(("read_file", {"path": f"{outside}/n.txt"}))
    srv.enqueue(read, text("Read."), read, text("Read again."))
    agent = start(acp_agent, srv, 2)
    sid = agent.new_session(acp_workspace)
    asked = []

    def allow_folder(message):
        asked.append(message)
        return {"outcome": {"outcome": "selected", "optionId": "allow-folder-session"}}
    agent.prompt(sid, "read it", timeout=30, on_request=allow_folder)
    assert len(asked) == 1
    fork_id = agent.request("session/fork", {"sessionId": sid, "cwd": acp_workspace})[
        "result"]["sessionId"]
    agent.prompt(fork_id, "read it again", timeout=30, on_request=allow_folder)
    assert len(asked) == 2 and asked[1]["params"]["sessionId"] == fork_id  # asked again


@PROTOCOLS
def test_delete_removes_the_session_and_a_later_resume_is_an_error(
        acp_agent, acp_workspace, acp_env, srv, protocol):
    with open(f"{acp_workspace}/a.txt", "w") as fh:
        fh.write("one\n")
    snapshots = shutil.which("bwrap") is not None
    if snapshots:  # a command in a git workspace: our snapshot repository exists too
        subprocess.run(("git", "init", "-q"), cwd=acp_workspace, check=True)
        srv.enqueue(calls(("shell", {"command": "echo c > c.txt"})), text("Ran."))
    srv.enqueue(calls(("create_file", {"path": "b.txt", "content": "b\n"})), text("Made."))
    agent = start(acp_agent, srv, protocol)
    sid = agent.new_session(acp_workspace)
    keep = agent.new_session(acp_workspace)
    if snapshots:
        agent.prompt(sid, "run c", timeout=30)
        assert os.path.isdir(os.path.join(acp_env["TERM2ACP_HOME"], "checkpoints", sid))
    agent.prompt(sid, "make b", timeout=30)
    assert agent.request("session/delete", {"sessionId": sid})["result"] == {}  # live: closed
    listed = agent.request("session/list", {})["result"]["sessions"]
    assert [s["sessionId"] for s in listed] == [keep]
    home = acp_env["TERM2ACP_HOME"]
    assert not any(sid in name for _base, dirs, files in os.walk(home) for name in dirs + files)
    resumed = agent.request("session/resume", setup_params(protocol, sessionId=sid,
                                                           cwd=acp_workspace))
    assert resumed["error"]["code"] == -32002 and sid in resumed["error"]["message"]
    again = agent.request("session/delete", {"sessionId": sid})  # the draft: silent success
    assert again["result"] == {}
    never = agent.request("session/delete", {"sessionId": "no-such-session"})
    assert never["result"] == {}
    agent.close()
    agent = start(acp_agent, srv, protocol)  # after a restart too
    assert [s["sessionId"] for s in agent.request("session/list", {})["result"]["sessions"]] \
        == [keep]
    prompt = agent.request("session/prompt", {"sessionId": sid,
                                               "prompt": [{"type": "text", "text": "hi"}]})
    assert prompt["error"]["code"] == -32002
