"""Approvals on the v1 face: the request in v1 form ({sessionId, toolCall, options}), the
same option table, and the v1 rows of every fail-closed rule (cancelled, malformed, unknown
option, client error, disconnect, turn cancelled, session closed, timeout, duplicates)."""

import os

import pytest

from term2acp.testing.harness import ANSWERED, is_response, selected


@pytest.fixture
def outside(tmp_path):
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text("outside text\n")
    return os.path.realpath(path)


@pytest.fixture
def v1(acp_agent, acp_workspace):
    def start(turns, env=None):
        agent = acp_agent(turns=turns, env=env, protocol=1)
        return agent, agent.new_session(acp_workspace)
    return start


def call(name, **arguments):
    return {"tool_call": {"name": name, "arguments": arguments}}


def options_of(request):
    return [(o["optionId"], o["name"], o["kind"]) for o in request["params"]["options"]]


def finals(updates):
    statuses = {}
    for u in updates:
        if u["sessionUpdate"] in ("tool_call", "tool_call_update") and "status" in u:
            statuses[u["toolCallId"]] = u
    return list(statuses.values())


def failure_text(updates):
    final = finals(updates)[-1]
    assert final["status"] == "failed", final
    return final["content"][0]["content"]["text"]


def permissions(on_answer, requests):
    def answer(message):
        if message["method"] == "session/request_permission":
            requests.append(message)
            return on_answer(message)
        return None
    return answer


@pytest.mark.parametrize("option, status", [("allow-once", "completed"),
                                            ("allow-folder-session", "completed"),
                                            ("reject", "failed")])
def test_read_outside_asks_in_v1_form(v1, outside, option, status):
    target = os.path.join(outside, "secret.txt")
    agent, sid = v1([[call("read_file", path=target)], [{"text": "ok"}]])
    requests = []
    response, updates, _ = agent.prompt(sid, "go", on_request=permissions(
        lambda m: selected(option), requests))
    assert response["result"]["stopReason"] == "end_turn"
    (request,) = requests
    params = request["params"]
    assert set(params) == {"sessionId", "toolCall", "options"} and params["sessionId"] == sid
    tool_call = params["toolCall"]
    first = next(u for u in updates if u["sessionUpdate"] == "tool_call")
    assert tool_call["toolCallId"] == first["toolCallId"]
    assert tool_call["status"] == "pending" and tool_call["kind"] == "read"
    assert tool_call["rawInput"] == {"path": target} and tool_call["title"]
    assert options_of(request) == [("allow-once", "Allow once", "allow_once"),
                                   ("allow-folder-session", "Allow folder for session", "allow_always"),
                                   ("reject", "Reject", "reject_once")]
    assert finals(updates)[-1]["status"] == status
    if status == "failed":
        assert failure_text(updates) == "Permission denied by client."
    else:
        assert "outside text" in finals(updates)[-1]["content"][0]["content"]["text"]
    agent.close()


def test_edit_outside_shows_the_v1_diff_and_writes_locally_once_allowed(v1, outside):
    target = os.path.join(outside, "made.txt")
    agent, sid = v1([[call("create_file", path=target, content="new\n")], [{"text": "ok"}]])
    requests = []
    agent.prompt(sid, "go", on_request=permissions(lambda m: selected("allow-once"), requests))
    assert options_of(requests[0]) == [
        ("allow-once", "Allow once", "allow_once"),
        ("allow-edit-folder-session", "Allow folder for session", "allow_always"),
        ("allow-edit-file-session", "Allow file for session", "allow_always"),
        ("reject", "Reject", "reject_once")]
    assert requests[0]["params"]["toolCall"]["content"] == [
        {"type": "diff", "path": target, "newText": "new\n"}]
    assert open(target).read() == "new\n"
    assert agent.fs_requests == []  # outside the root the editor does not write
    agent.close()


@pytest.mark.parametrize("answer, reason", [
    ({"outcome": {"outcome": "cancelled"}}, "Permission request was cancelled."),
    ({}, "Permission request was cancelled."),
    ({"outcome": "selected"}, "Permission request was cancelled."),
    ({"outcome": {"outcome": "selected", "optionId": 5}}, "Permission request was cancelled."),
    ({"outcome": {"outcome": "selected"}}, "Client selected an unknown permission option."),
    ({"outcome": {"outcome": "selected", "optionId": "approve-everything"}},
     "Client selected an unknown permission option."),
    ({"outcome": {"outcome": "_custom_yes", "optionId": "allow-once"}},
     "Permission request was cancelled."),
    ("yes", "Permission request was cancelled."),
])
def test_doubtful_answers_deny(v1, outside, answer, reason):
    target = os.path.join(outside, "never.txt")
    agent, sid = v1([[call("create_file", path=target, content="x")], [{"text": "ok"}]])
    _, updates, _ = agent.prompt(sid, "go", on_request=permissions(lambda m: answer, []))
    assert failure_text(updates) == reason
    assert not os.path.exists(target)
    agent.close()


@pytest.mark.parametrize("error, reason", [
    ({"code": -32601, "message": "Method not found"}, "Approval is not yet supported over ACP."),
    ({"code": -32603, "message": "client blew up"}, "Permission request failed."),
])
def test_client_errors_deny(v1, outside, error, reason):
    target = os.path.join(outside, "never.txt")
    agent, sid = v1([[call("create_file", path=target, content="x")], [{"text": "ok"}]])

    def answer_with_error(message):
        agent.send({"jsonrpc": "2.0", "id": message["id"], "error": error})
        return ANSWERED
    _, updates, _ = agent.prompt(sid, "go", on_request=permissions(answer_with_error, []))
    assert failure_text(updates) == reason and not os.path.exists(target)
    agent.close()


@pytest.mark.parametrize("how", ["cancel", "close"])
def test_cancel_or_close_while_pending_denies_withdraws_and_answers_cancelled(v1, outside, how):
    target = os.path.join(outside, "never.txt")
    agent, sid = v1([[call("create_file", path=target, content="x")], [{"text": "ok"}]])
    prompt_id = agent.prompt_async(sid, "go")
    request = agent.wait_for(lambda m: m.get("method") == "session/request_permission")
    if how == "cancel":
        agent.notify("session/cancel", {"sessionId": sid})
    else:
        close_id = agent.request_async("session/close", {"sessionId": sid})
    withdraw = agent.wait_for(lambda m: m.get("method") == "$/cancel_request")
    assert withdraw["params"] == {"requestId": request["id"]}
    response = agent.wait_for(lambda m: is_response(m, prompt_id), timeout=5)
    assert response["result"]["stopReason"] == "cancelled"
    agent.send({"jsonrpc": "2.0", "id": request["id"], "result": selected("allow-once")})  # late
    if how == "close":
        agent.wait_for(lambda m: is_response(m, close_id))
    statuses = [m["params"]["update"].get("status") for m in agent.messages
                if m.get("method") == "session/update"
                and m["params"]["update"]["sessionUpdate"] in ("tool_call", "tool_call_update")]
    assert statuses[-1] == "failed"  # v1 has no "cancelled" tool status
    assert agent.request("session/list", {})["result"]["sessions"]  # still answering
    assert not os.path.exists(target)
    agent.close()


def test_an_allow_sent_right_behind_the_close_is_not_honoured(v1, outside):
    target = os.path.join(outside, "never.txt")
    agent, sid = v1([[call("create_file", path=target, content="x")], [{"text": "ok"}]])
    prompt_id = agent.prompt_async(sid, "go")
    request = agent.wait_for(lambda m: m.get("method") == "session/request_permission")
    agent.send_raw(b'{"jsonrpc":"2.0","id":7,"method":"session/close","params":{"sessionId":"'
                   + sid.encode() + b'"}}\n{"jsonrpc":"2.0","id":' + str(request["id"]).encode()
                   + b',"result":{"outcome":{"outcome":"selected","optionId":"allow-once"}}}\n')
    response = agent.wait_for(lambda m: is_response(m, prompt_id), timeout=5)
    assert response["result"]["stopReason"] == "cancelled"
    assert not os.path.exists(target)
    agent.close()


def test_disconnect_while_pending_denies_and_exits_cleanly(v1, outside):
    target = os.path.join(outside, "never.txt")
    agent, sid = v1([[call("create_file", path=target, content="x")], [{"text": "ok"}]])
    agent.prompt_async(sid, "go")
    agent.wait_for(lambda m: m.get("method") == "session/request_permission")
    agent.close_stdin()
    assert agent.wait(5) == 0
    assert not os.path.exists(target)


def test_approval_timeout_denies_when_configured(v1, outside):
    target = os.path.join(outside, "never.txt")
    agent, sid = v1([[call("create_file", path=target, content="x")], [{"text": "ok"}]],
                    env={"TERM2ACP_APPROVAL_TIMEOUT": "0.2"})
    _, updates, _ = agent.prompt(sid, "go", on_request=permissions(lambda m: ANSWERED, []))
    assert failure_text(updates) == "No response to the permission request before the timeout."
    assert any(m.get("method") == "$/cancel_request" for m in agent.messages)
    assert not os.path.exists(target)
    agent.close()


def test_duplicate_and_unsolicited_answers_are_ignored(v1, outside):
    target = os.path.join(outside, "made.txt")
    agent, sid = v1([[call("create_file", path=target, content="x"),
                      call("create_file", path=target + "2", content="x")], [{"text": "ok"}]])
    agent.send({"jsonrpc": "2.0", "id": 4242, "result": selected("allow-once")})  # never asked

    def twice(message):
        agent.send({"jsonrpc": "2.0", "id": message["id"], "result": selected("reject")})
        agent.send({"jsonrpc": "2.0", "id": message["id"], "result": selected("allow-once")})
        return ANSWERED
    _, updates, _ = agent.prompt(sid, "go", on_request=permissions(twice, []))
    assert [f["status"] for f in finals(updates)] == ["failed", "failed"]
    assert not os.path.exists(target) and not os.path.exists(target + "2")
    agent.close()
