"""Tools and approvals over the real launcher: every option, every fail-closed path, grants."""

import os

import pytest

from term2acp.testing.harness import selected


READ_OUT = [{"id": "o1", "optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
            {"optionId": "allow-folder-session", "name": "Allow folder for session", "kind": "allow_always"},
            {"optionId": "reject", "name": "Reject", "kind": "reject_once"}]


def options_of(request):
    return [(o["optionId"], o["name"], o["kind"]) for o in request["params"]["options"]]


@pytest.fixture
def outside(tmp_path):
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text("outside text\n")
    (path / "other.txt").write_text("other text\n")
    return os.path.realpath(path)


def call(name, **arguments):
    return {"tool_call": {"name": name, "arguments": arguments}}


def tool_updates(updates):
    return [u for u in updates if u["sessionUpdate"] == "tool_call_update"]


def final_status(updates):
    statuses = {}
    for u in tool_updates(updates):
        if "status" in u:
            statuses[u["toolCallId"]] = u["status"]
    return list(statuses.values())


def failure_text(updates):
    failed = [u for u in tool_updates(updates) if u.get("status") == "failed"]
    return failed[-1]["content"][0]["content"]["text"]


# ---------------------------------------------------------------- inside the root: no asking
def test_tools_inside_the_root_run_without_asking(started, workspace):
    with open(os.path.join(workspace, "a.py"), "w") as fh:
        fh.write("x = 1\n")
    agent, sid = started([[call("read_file", path="a.py"), call("list_directory", path="."),
                             call("glob", pattern="*.py"), call("grep", pattern="x ="),
                             call("create_file", path="new/b.py", content="y = 2\n"),
                             call("edit_file", path="a.py", edits=[{"old_text": "x = 1", "new_text": "x = 3"}])],
                            [{"text": "done"}]])
    asked = []
    _, updates, idle = agent.prompt(sid, "go", on_request=lambda m: asked.append(m) or selected("reject"))
    assert asked == []
    assert final_status(updates) == ["completed"] * 6
    firsts = {}
    for u in tool_updates(updates):
        firsts.setdefault(u["toolCallId"], u)
    assert [f["kind"] for f in firsts.values()] == ["read", "read", "search", "search", "edit", "edit"]
    assert all(f["status"] == "pending" and f["title"] and "rawInput" in f for f in firsts.values())
    assert open(os.path.join(workspace, "a.py")).read() == "x = 3\n"
    assert open(os.path.join(workspace, "new", "b.py")).read() == "y = 2\n"
    edit_id = list(firsts)[-1]  # the round's calls run side by side: found by its id
    edit_done = [u for u in tool_updates(updates)
                 if u["toolCallId"] == edit_id and u.get("status") == "completed"][-1]
    diff = edit_done["content"][0]
    assert diff["type"] == "diff" and diff["changes"] == [
        {"operation": "modify", "path": os.path.join(workspace, "a.py"), "fileType": "text"}]
    assert "-x = 1\n+x = 3\n" in diff["patch"]["text"]
    agent.close()


# ---------------------------------------------------------------- read outside
@pytest.mark.parametrize("option, status", [("allow-once", "completed"),
                                            ("allow-folder-session", "completed"),
                                            ("reject", "failed")])
def test_read_outside_offers_the_folder_read_options(started, outside, option, status):
    agent, sid = started([[call("read_file", path=os.path.join(outside, "secret.txt"))],
                            [{"text": "ok"}]])
    requests = []
    _, updates, idle = agent.prompt(sid, "go", on_request=lambda m: requests.append(m) or selected(option))
    assert len(requests) == 1
    assert options_of(requests[0]) == [("allow-once", "Allow once", "allow_once"),
                                       ("allow-folder-session", "Allow folder for session", "allow_always"),
                                       ("reject", "Reject", "reject_once")]
    subject = requests[0]["params"]["subject"]
    assert subject["type"] == "tool_call" and subject["toolCall"]["rawInput"]["path"].endswith("secret.txt")
    assert final_status(updates) == [status]
    states = [u.get("state") for u in updates if u["sessionUpdate"] == "state_update"]
    assert states == ["running", "requires_action", "running", "idle"]
    if status == "failed":
        assert failure_text(updates) == "Permission denied by client."
    else:
        done = [u for u in tool_updates(updates) if u.get("status") == "completed"][0]
        assert "outside text" in done["content"][0]["content"]["text"]
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    agent.close()


def test_folder_grant_covers_later_prompts_until_close(started, outside, workspace):
    read = call("read_file", path=os.path.join(outside, "secret.txt"))
    other = call("read_file", path=os.path.join(outside, "other.txt"))
    agent, sid = started([[read], [{"text": "1"}], [other], [{"text": "2"}], [read], [{"text": "3"}]])
    asked = []
    agent.prompt(sid, "one", on_request=lambda m: asked.append(m) or selected("allow-folder-session"))
    _, updates, _ = agent.prompt(sid, "two", on_request=lambda m: asked.append(m) or selected("reject"))
    assert len(asked) == 1 and final_status(updates) == ["completed"]
    agent.request("session/close", {"sessionId": sid})
    agent.request("session/resume", {"sessionId": sid, "cwd": workspace})
    _, updates, _ = agent.prompt(sid, "three", on_request=lambda m: asked.append(m) or selected("reject"))
    assert len(asked) == 2 and final_status(updates) == ["failed"]  # the grant died with the close
    agent.close()


# ---------------------------------------------------------------- edit outside
@pytest.mark.parametrize("option", ["allow-once", "allow-edit-file-session",
                                    "allow-edit-folder-session", "reject"])
def test_edit_outside_offers_the_edit_options(started, outside, option):
    target = os.path.join(outside, "made.txt")
    agent, sid = started([[call("create_file", path=target, content="new\n")], [{"text": "ok"}],
                            [call("create_file", path=target + ".2", content="two\n")],
                            [{"text": "ok"}]])
    requests = []
    _, updates, _ = agent.prompt(sid, "go", on_request=lambda m: requests.append(m) or selected(option))
    assert options_of(requests[0]) == [
        ("allow-once", "Allow once", "allow_once"),
        ("allow-edit-folder-session", "Allow folder for session", "allow_always"),
        ("allow-edit-file-session", "Allow file for session", "allow_always"),
        ("reject", "Reject", "reject_once")]
    diff = requests[0]["params"]["subject"]["toolCall"]["content"][0]
    assert diff["type"] == "diff" and diff["changes"][0] == {"operation": "add", "path": target, "fileType": "text"}
    assert "+new" in diff["patch"]["text"]
    assert os.path.exists(target) == (option != "reject")
    # the folder grant covers a sibling without asking; the file grant and allow-once do not
    requests.clear()
    agent.prompt(sid, "again", on_request=lambda m: requests.append(m) or selected("reject"))
    assert bool(requests) == (option != "allow-edit-folder-session")
    assert os.path.exists(target + ".2") == (option == "allow-edit-folder-session")
    agent.close()


# ---------------------------------------------------------------- fail closed
@pytest.mark.parametrize("answer, reason", [
    ({"outcome": {"outcome": "cancelled"}}, "Permission request was cancelled."),
    ({}, "Permission request was cancelled."),
    ({"outcome": "selected"}, "Permission request was cancelled."),
    ({"outcome": {"outcome": "selected", "optionId": 5}}, "Permission request was cancelled."),
    ({"outcome": {"outcome": "selected"}}, "Client selected an unknown permission option."),
    ({"outcome": {"outcome": "selected", "optionId": "approve-everything"}}, "Client selected an unknown permission option."),
    ({"outcome": {"outcome": "_custom_yes", "optionId": "allow-once"}}, "Permission request was cancelled."),
    ("yes", "Permission request was cancelled."),
])
def test_doubtful_answers_deny(started, outside, answer, reason):
    target = os.path.join(outside, "never.txt")
    agent, sid = started([[call("create_file", path=target, content="x")], [{"text": "ok"}]])
    _, updates, _ = agent.prompt(sid, "go", on_request=lambda m: answer)
    assert final_status(updates) == ["failed"] and failure_text(updates) == reason
    assert not os.path.exists(target)
    agent.close()


@pytest.mark.parametrize("error, reason", [
    ({"code": -32601, "message": "Method not found"}, "Approval is not yet supported over ACP."),
    ({"code": -32603, "message": "client blew up"}, "Permission request failed."),
])
def test_client_errors_deny(started, outside, error, reason):
    target = os.path.join(outside, "never.txt")
    agent, sid = started([[call("create_file", path=target, content="x")], [{"text": "ok"}]])

    def answer_with_error(message):
        agent.send({"jsonrpc": "2.0", "id": message["id"], "error": error})
    _, updates, _ = agent.prompt(sid, "go", on_request=answer_with_error)
    assert failure_text(updates) == reason and not os.path.exists(target)
    agent.close()


def pending_request(agent, sid, outside, env=None):
    agent.prompt_async(sid, "go")
    return agent.wait_for(lambda m: m.get("method") == "session/request_permission")


@pytest.mark.parametrize("how", ["cancel", "close"])
def test_cancel_or_close_while_pending_denies_and_withdraws_the_request(started, outside, how):
    target = os.path.join(outside, "never.txt")
    agent, sid = started([[call("create_file", path=target, content="x")], [{"text": "ok"}]])
    request = pending_request(agent, sid, outside)
    if how == "cancel":
        agent.notify("session/cancel", {"sessionId": sid})
    else:
        close_id = agent.request_async("session/close", {"sessionId": sid})
    withdraw = agent.wait_for(lambda m: m.get("method") == "$/cancel_request")
    assert withdraw["params"] == {"requestId": request["id"]}
    idle = agent.wait_update(state="idle")
    assert idle["stopReason"] == "cancelled"
    agent.send({"jsonrpc": "2.0", "id": request["id"], "result": selected("allow-once")})  # too late
    if how == "close":
        agent.wait_for(lambda m: m.get("id") == close_id)
    statuses = [m["params"]["update"].get("status") for m in agent.messages
                if m.get("method") == "session/update"
                and m["params"]["update"]["sessionUpdate"] == "tool_call_update"]
    assert statuses[-1] in ("failed", "cancelled")
    assert agent.request("session/list", {})["result"]["sessions"]  # still alive and answering
    assert not os.path.exists(target)
    agent.close()


def test_disconnect_while_pending_denies_and_exits_cleanly(started, outside):
    target = os.path.join(outside, "never.txt")
    agent, sid = started([[call("create_file", path=target, content="x")], [{"text": "ok"}]])
    pending_request(agent, sid, outside)
    agent.close_stdin()
    assert agent.wait(5) == 0
    assert not os.path.exists(target)


def test_approval_timeout_denies_when_configured(started, outside):
    target = os.path.join(outside, "never.txt")
    agent, sid = started([[call("create_file", path=target, content="x")], [{"text": "ok"}]],
                           env={"TERM2ACP_APPROVAL_TIMEOUT": "0.2"})
    _, updates, _ = agent.prompt(sid, "go", on_request=lambda m: None)  # never answers
    assert failure_text(updates) == "No response to the permission request before the timeout."
    assert any(m.get("method") == "$/cancel_request" for m in agent.messages)
    assert not os.path.exists(target)
    agent.close()


def test_duplicate_and_unsolicited_answers_are_ignored(started, outside):
    target = os.path.join(outside, "made.txt")
    agent, sid = started([[call("create_file", path=target, content="x"),
                             call("create_file", path=target + "2", content="x")], [{"text": "ok"}]])
    agent.send({"jsonrpc": "2.0", "id": 4242, "result": selected("allow-once")})  # never asked

    def twice(message):
        agent.send({"jsonrpc": "2.0", "id": message["id"], "result": selected("reject")})
        agent.send({"jsonrpc": "2.0", "id": message["id"], "result": selected("allow-once")})
    _, updates, _ = agent.prompt(sid, "go", on_request=twice)
    assert final_status(updates) == ["failed", "failed"]
    assert not os.path.exists(target) and not os.path.exists(target + "2")
    agent.close()


def test_secrets_are_redacted_from_the_permission_description(started, outside):
    target = os.path.join(outside, "env.txt")
    agent, sid = started([[call("create_file", path=target,
                                  content="api_key=sk-abcdefghijklmnop\nAuthorization: Bearer abcdefghijklmnop")],
                            [{"text": "ok"}]])
    requests = []
    agent.prompt(sid, "go", on_request=lambda m: requests.append(m) or selected("reject"))
    description = requests[0]["params"]["description"]
    assert "sk-abcdefghijklmnop" not in description and "Bearer abcdefghijklmnop" not in description
    assert "<redacted>" in description
    agent.close()


# ---------------------------------------------------------------- hostile paths
@pytest.mark.parametrize("path", ["../escape.txt", "sub/../../escape.txt", "link/escape.txt"])
def test_traversal_and_symlinks_out_of_the_root_ask_and_write_nothing_when_denied(
        started, workspace, outside, path):
    os.symlink(outside, os.path.join(workspace, "link"))
    agent, sid = started([[call("create_file", path=path, content="pwned")], [{"text": "ok"}]])
    asked = []
    _, updates, _ = agent.prompt(sid, "go", on_request=lambda m: asked.append(m) or selected("reject"))
    assert len(asked) == 1 and final_status(updates) == ["failed"]
    parent = os.path.dirname(workspace)
    assert not os.path.exists(os.path.join(parent, "escape.txt"))
    assert not os.path.exists(os.path.join(outside, "escape.txt"))
    agent.close()
