"""Issue 23, wave-1 leftovers at the wire edge: a non-UTF-8 workspace name in session/list,
a lone surrogate as a session id, a prompt nested deeper than the JSON parser goes."""

import json
import os

import pytest


def nested_json(depth):
    return '{"x":' * depth + '"deep"' + "}" * depth


def test_session_list_on_a_non_utf8_workspace_name_answers_an_empty_list(agent, tmp_path):
    raw = os.fsencode(tmp_path) + b"/caf\xe9"
    os.mkdir(raw)
    response = agent.request("session/list", {"cwd": os.fsdecode(raw)})  # sent as \udce9
    assert response["result"] == {"sessions": []}
    agent.close()


@pytest.mark.parametrize("method", ["session/resume", "session/close", "session/prompt",
                                    "session/set_config_option"])
def test_a_lone_surrogate_session_id_is_invalid_params(agent, workspace, method):
    params = {"sessionId": "\ud800", "cwd": workspace, "prompt": [], "configId": "mode",
              "value": "auto"}
    line = json.dumps({"jsonrpc": "2.0", "id": "s1", "method": method, "params": params})
    agent.send_raw(line.encode() + b"\n")  # json.dumps writes the surrogate as \ud800
    error = agent.wait_for(lambda m: m.get("id") == "s1")["error"]
    assert error["code"] == -32602 and "lone surrogate" in error["message"]
    assert agent.request("session/list", {})["result"] == {"sessions": []}
    agent.close()


@pytest.mark.parametrize("depth", [980, 5000])
def test_a_prompt_nested_deeper_than_the_parser_is_answered_with_its_id(started, depth):
    agent, sid = started([[{"text": "still fine"}]])
    agent.send_raw(('{"jsonrpc":"2.0","id":"deep","method":"session/prompt","params":{'
                    f'"sessionId":"{sid}","prompt":[{{"type":"text","text":"hi","_meta":'
                    f'{nested_json(depth)}}}]}}}}\n').encode())
    answer = agent.wait_for(lambda m: "error" in m and "result" not in m)
    assert answer["id"] == "deep" and answer["error"]["code"] == -32600
    assert "deeper than 64 levels" in answer["error"]["message"]
    _, _, idle = agent.prompt(sid, "plain")
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    agent.close()
