"""JSON-RPC over the real launcher: initialize, every error code, batches, limits, exit."""

import json
import signal

import pytest

INIT = {"protocolVersion": 2, "info": {"name": "t", "version": "1"}}


def error_of(message):
    assert "error" in message, message
    return message["error"]


def test_initialize_result_is_exact(spawn):
    agent = spawn()
    response = agent.request("initialize", INIT)
    from term2acp import __version__

    assert response["result"] == {
        "protocolVersion": 2,
        "info": {"name": "term2", "title": "term2", "version": __version__},
        "capabilities": {"session": {"prompt": {"embeddedContext": {}},
                                 "mcp": {"stdio": {}, "http": {}},
                                 "fork": {}, "delete": {},
                                 "additionalDirectories": {}}},  # issues 28, 39
        "_meta": {"steering": {"supported": True}},
        # issue 15: sign-in (tests/e2e/test_auth.py); no terminal method without auth.terminal
        "authMethods": [
            {"type": "agent", "methodId": "openai",
             "name": "OpenAI (or an OpenAI-compatible server) API key",
             "description": "Set OPENAI_API_KEY in the agent's environment (the editor's agent "
                            "settings), or store it with term2-acp --login; then sign in again."},
            {"type": "agent", "methodId": "anthropic", "name": "Anthropic API key",
             "description": "Set ANTHROPIC_API_KEY in the agent's environment (the editor's "
                            "agent settings), or store it with term2-acp --login; then sign in "
                            "again."}],
    }
    assert agent.close() == 0


@pytest.mark.parametrize("version", [2, 3, 65535])
def test_initialize_answers_version_2_from_2_up(spawn, version):
    """2 and above speak v2 (the answer says 2); 1 and 0 are covered in test_v1_initialize."""
    agent = spawn()
    response = agent.request("initialize", dict(INIT, protocolVersion=version))
    assert response["result"]["protocolVersion"] == 2
    agent.close()


def test_initialize_requires_info(spawn):
    agent = spawn()
    error = error_of(agent.request("initialize", {"protocolVersion": 2}))
    assert error["code"] == -32602
    assert "info" in error["data"]["errors"]
    assert agent.request("initialize", INIT)["result"]["protocolVersion"] == 2  # still possible
    agent.close()


def test_methods_before_initialize_are_invalid_requests(spawn):
    agent = spawn()
    error = error_of(agent.request("session/list", {}))
    assert error["code"] == -32600
    assert "initialized" in error["message"]
    agent.close()


def test_second_initialize_is_refused(agent):
    assert error_of(agent.request("initialize", INIT))["code"] == -32600
    agent.close()


def test_initialize_inside_a_batch_is_refused(spawn):
    agent = spawn()
    agent.send([{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT},
                {"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}}])
    batch = agent.next_message()
    assert isinstance(batch, list)
    by_id = {m["id"]: m for m in batch}
    assert by_id[1]["error"]["code"] == -32600
    assert by_id[2]["error"]["code"] == -32600
    agent.close()


@pytest.mark.parametrize("raw, code", [
    (b"{not json", -32700),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "x", "params": NaN}', -32700),
    (b"\xff\xfe\x00garbage", -32700),
    (b'"just a string"', -32600),
    (b"42", -32600),
    (b'{"id": 5}', -32600),
    (b'{"jsonrpc": "1.0", "id": 5, "method": "session/list"}', -32600),
    (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "session/list"}', -32600),
    (b'{"jsonrpc": "2.0", "id": 6, "method": 7}', -32600),
])
def test_garbage_lines_get_precise_errors_and_reading_continues(agent, raw, code):
    agent.send_raw(raw + b"\n")
    message = agent.next_message()
    assert error_of(message)["code"] == code
    assert agent.request("session/list", {})["result"] == {"sessions": []}
    agent.close()


@pytest.mark.parametrize("request_id", ["abc", 7, 2 ** 53 + 1, 1.5, None, "", "🙂"])
def test_ids_of_every_json_type_are_echoed_exactly(agent, request_id):
    agent.send({"jsonrpc": "2.0", "id": request_id, "method": "no/such"})
    message = agent.next_message()
    assert message["id"] == request_id and type(message["id"]) is type(request_id)
    assert message["error"]["code"] == -32601
    agent.close()


# auth/login, auth/logout and session/set_config_option exist since issue 15
# (tests/e2e/test_auth.py, tests/e2e/test_controls.py); set_mode is v1-only.
# session/fork and session/delete exist since issue 28 (tests/e2e/test_fork_delete.py).
@pytest.mark.parametrize("method", ["session/load", "session/set_mode", "fs/read_text_file",
                                    "_vendor/thing"])
def test_unimplemented_methods_are_method_not_found(agent, method):
    error = error_of(agent.request(method, {}))
    assert error["code"] == -32601
    assert error["data"] == {"method": method}
    agent.close()


def test_unknown_notifications_get_no_response(agent):
    agent.notify("no/such", {})
    agent.notify("_vendor/ping", {})
    assert agent.request("session/list", {})["result"] == {"sessions": []}
    assert len(agent.messages) == 2  # initialize + list: nothing for the notifications
    agent.close()


@pytest.mark.parametrize("params", [{"cwd": 5}, {}, [1, 2]])
def test_params_failing_their_schema_are_invalid_params(agent, params):
    error = error_of(agent.request("session/new", params))
    assert error["code"] == -32602
    if isinstance(params, dict):
        assert "cwd" in error["data"]["errors"]
    agent.close()


def test_batch_mixed(agent):
    agent.send([
        {"jsonrpc": "2.0", "id": "a", "method": "session/list", "params": {}},
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "nope"}},
        17,
        {"jsonrpc": "2.0", "id": "b", "method": "no/such"},
    ])
    batch = agent.next_message()
    assert isinstance(batch, list) and len(batch) == 3
    by_id = {json.dumps(m["id"]): m for m in batch}
    assert by_id['"a"']["result"] == {"sessions": []}
    assert by_id['"b"']["error"]["code"] == -32601
    assert by_id["null"]["error"]["code"] == -32600
    agent.close()


def test_batch_empty_gets_a_single_error(agent):
    agent.send_raw(b"[]\n")
    message = agent.next_message()
    assert isinstance(message, dict) and message["error"]["code"] == -32600 and message["id"] is None
    agent.close()


def test_batch_of_notifications_gets_nothing(agent):
    agent.send([{"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "x"}},
                {"jsonrpc": "2.0", "method": "no/such"}])
    reply = agent.request("session/list", {})
    assert reply["result"] == {"sessions": []}
    assert agent.messages[-1] is reply and len(agent.messages) == 2
    agent.close()


def test_oversized_line_is_answered_and_skipped(spawn):
    agent = spawn(env={"TERM2ACP_MAX_LINE_BYTES": "4096"})
    agent.initialize()
    agent.send_raw(b'{"jsonrpc":"2.0","id":9,"method":"session/list","params":{"x":"'
                   + b"a" * 200_000 + b'"}}\n')
    error = error_of(agent.next_message())
    assert error["code"] == -32600 and "exceeds the line limit" in error["message"]
    assert agent.request("session/list", {})["result"] == {"sessions": []}
    agent.close()


def test_responses_to_unknown_ids_are_ignored(agent):
    agent.send({"jsonrpc": "2.0", "id": 12345, "result": {}})
    agent.send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
    assert agent.request("session/list", {})["result"] == {"sessions": []}
    agent.close()


@pytest.mark.acp_process
def test_eof_exits_0_quickly(agent):
    agent.close_stdin()
    assert agent.wait(timeout=2) == 0


@pytest.mark.acp_process
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signals_exit_0(agent, signum):
    agent.proc.send_signal(signum)
    assert agent.wait(timeout=5) == 0
    assert agent.schema_errors == []


@pytest.mark.acp_process
def test_stdout_carries_only_json_rpc_lines(agent, workspace):
    agent.send_raw(b"nonsense\n")
    agent.next_message()
    agent.new_session(workspace)
    agent.close()
    for line in agent.lines:
        message = json.loads(line)
        items = message if isinstance(message, list) else [message]
        assert all(item["jsonrpc"] == "2.0" for item in items)


@pytest.mark.acp_process
def test_children_can_neither_read_nor_reconfigure_the_protocol_pipes(agent):
    """Regression: a child process inheriting fd 0 shared its open file description, was
    able to read protocol bytes, and switched it to blocking mode, which froze the agent
    (a cancel arrived and nothing happened). fd 0 is /dev/null and fd 1 is stderr now."""
    import os

    pid = agent.proc.pid
    assert os.readlink(f"/proc/{pid}/fd/0") == "/dev/null"
    assert os.readlink(f"/proc/{pid}/fd/1") == os.readlink(f"/proc/{pid}/fd/2")
    assert agent.request("session/list", {})["result"] == {"sessions": []}
    agent.close()


@pytest.mark.acp_process
def test_logging_goes_to_stderr_or_the_log_file_never_stdout(spawn, tmp_path, workspace):
    agent = spawn(env={"TERM2ACP_LOG_LEVEL": "DEBUG"})
    agent.initialize()
    agent.new_session(workspace)
    assert agent.close() == 0
    assert "term2acp.wire" in agent.stderr and '"method": "session/new"' in agent.stderr
    # with a log file the detail goes there; stderr (which agent-shell prints into the
    # chat) keeps warnings and errors only
    log_file = tmp_path / "agent.log"
    agent = spawn(env={"TERM2ACP_LOG_LEVEL": "DEBUG", "TERM2ACP_LOG_FILE": str(log_file)})
    agent.initialize()
    agent.new_session(workspace)
    assert agent.close() == 0
    assert "DEBUG" not in agent.stderr and "INFO" not in agent.stderr
    logged = log_file.read_text()
    assert "DEBUG term2acp.wire" in logged and "session/new" in logged
    for line in agent.lines:  # stdout: protocol messages only, whatever the log level
        assert json.loads(line)["jsonrpc"] == "2.0"
