"""additionalDirectories through the launcher against the fake model server, v1 and v2:
advertised; in an additional root the model reads, creates and (shell) writes unasked in
auto mode, its AGENTS.md and the roots are in the request; the roots come with resume,
load and fork (the complete list each time); a missing directory, a relative path and a
plain file are -32602 naming the path."""

import json
import os

import pytest

from tests.e2e.test_fork_delete import PROTOCOLS, setup_params, start
from tests.e2e.test_undo import BWRAP, calls, read, srv, text, write  # noqa: F401 - srv


def new_with_roots(agent, protocol, cwd, roots):
    response = agent.request("session/new", setup_params(protocol, cwd=cwd,
                                                         additionalDirectories=roots))
    assert "result" in response, response
    sid = response["result"]["sessionId"]
    agent.wait_update("available_commands_update", session_id=sid)
    return sid


def asked(agent):
    return [m for m in agent.messages if m.get("method") == "session/request_permission"]


def sent(request):
    return json.dumps(request.json["messages"])


@pytest.fixture
def other(tmp_path):
    root = tmp_path / "other"
    root.mkdir()
    write(str(root / "AGENTS.md"), "Other root rule: say ZEBRA.\n")
    write(str(root / "data.txt"), "from the other root\n")
    return os.path.realpath(root)


@pytest.mark.acp_process
@PROTOCOLS
def test_an_additional_root_is_a_workspace(acp_agent, acp_workspace, srv, other, protocol):
    steps = [calls(("read_file", {"path": f"{other}/data.txt"})),
             calls(("create_file", {"path": f"{other}/made.txt", "content": "made\n"}))]
    if BWRAP:
        steps.append(calls(("shell", {"command": f"echo shell > {other}/shell.txt"})))
    srv.enqueue(*steps, text("done"))
    agent = start(acp_agent, srv, protocol)
    caps = agent.messages[0]["result"]
    advertised = caps["agentCapabilities"]["sessionCapabilities"] if protocol == 1 else \
        caps["capabilities"]["session"]
    assert advertised["additionalDirectories"] == {}
    sid = new_with_roots(agent, protocol, acp_workspace, [other])
    agent.prompt(sid, "use the other root", timeout=30)
    assert not asked(agent)
    first = srv.requests[-len(steps) - 1]
    assert "Other root rule: say ZEBRA." in sent(first) and other in sent(first)
    assert "from the other root" in sent(srv.requests[-len(steps)])
    assert read(f"{other}/made.txt") == "made\n"
    if BWRAP:
        assert read(f"{other}/shell.txt") == "shell\n"
    agent.close()


@PROTOCOLS
def test_roots_come_with_resume_load_and_fork(acp_agent, acp_workspace, srv, other, tmp_path,
                                              protocol):
    srv.enqueue(text("one"), calls(("create_file", {"path": f"{other}/r.txt", "content": "r\n"})),
                text("two"), calls(("create_file", {"path": f"{other}/f.txt", "content": "f\n"})),
                text("three"))
    agent = start(acp_agent, srv, protocol)
    sid = agent.new_session(acp_workspace)  # no other root yet
    agent.prompt(sid, "hello")
    assert other not in sent(srv.requests[-1])
    agent.close()
    agent = start(acp_agent, srv, protocol)
    method = "session/load" if protocol == 1 else "session/resume"
    resumed = agent.request(method, setup_params(protocol, sessionId=sid, cwd=acp_workspace,
                                                 additionalDirectories=[other]))
    assert "result" in resumed, resumed
    agent.prompt(sid, "write there", timeout=30)
    assert not asked(agent) and read(f"{other}/r.txt") == "r\n"
    assert "Other root rule: say ZEBRA." in sent(srv.requests[-2])
    forked = agent.request("session/fork", setup_params(protocol, sessionId=sid,
                                                        cwd=acp_workspace,
                                                        additionalDirectories=[other]))
    assert "result" in forked, forked
    fork = forked["result"]["sessionId"]
    agent.wait_update("available_commands_update", session_id=fork)
    agent.prompt(fork, "write there too", timeout=30)
    assert not asked(agent) and read(f"{other}/f.txt") == "f\n"
    agent.close()


@PROTOCOLS
def test_without_the_root_again_its_files_ask(acp_agent, acp_workspace, srv, other, protocol):
    srv.enqueue(text("one"), calls(("create_file", {"path": f"{other}/no.txt", "content": "x"})),
                text("refused"))
    agent = start(acp_agent, srv, protocol)
    sid = new_with_roots(agent, protocol, acp_workspace, [other])
    agent.prompt(sid, "hello")
    method = "session/load" if protocol == 1 else "session/resume"
    again = agent.request(method, setup_params(protocol, sessionId=sid, cwd=acp_workspace))
    assert "result" in again, again
    agent.prompt(sid, "write there", on_request=lambda m: {"outcome": {"outcome": "cancelled"}})
    assert asked(agent) and not os.path.exists(f"{other}/no.txt")
    assert "No other workspace roots any more." in sent(srv.requests[-1])
    agent.close()


@PROTOCOLS
@pytest.mark.parametrize("method", ["session/new", "session/resume", "session/fork"])
def test_bad_roots_are_refused_by_name(acp_agent, acp_workspace, srv, tmp_path, protocol, method):
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    agent = start(acp_agent, srv, protocol)
    sid = agent.new_session(acp_workspace)
    for bad, why in ((str(tmp_path / "missing"), "does not exist"),
                     (str(plain), "is not a directory"), ("relative/dir", "is not an absolute path")):
        params = setup_params(protocol, cwd=acp_workspace, additionalDirectories=[bad])
        if method != "session/new":
            params["sessionId"] = sid
        error = agent.request(method, params)["error"]
        assert error["code"] == -32602 and f"additionalDirectories: {bad} {why}" in \
            error["message"], error
    agent.close()
