"""Version negotiation over the real launcher: initialize picks the face per connection.

1 gets the v1 answer (validated against the v1 schema by the kit), 2 and above today's v2
answer saying 2; 0, a negative number or a non-integer is -32602; each request is
validated against the shape of the version it names; the version is fixed afterwards.
"""

import pytest

from term2acp import __version__
from term2acp.testing.harness import ZED_V1_INITIALIZE

V1_ANSWER = {
    "protocolVersion": 1,
    "agentInfo": {"name": "term2", "title": "term2", "version": __version__},
    "agentCapabilities": {
        "loadSession": True,
        "promptCapabilities": {"embeddedContext": True},
        "mcpCapabilities": {"http": True, "sse": True},
        "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "fork": {},
                                "delete": {}, "additionalDirectories": {}},
        "auth": {"logout": {}},
    },
    "_meta": {"steering": {"supported": True}},  # issue 39
    "authMethods": [
        {"id": "openai", "name": "OpenAI (or an OpenAI-compatible server) API key",
         "type": "agent",
         "description": "Set OPENAI_API_KEY in the agent's environment (the editor's agent "
                        "settings), or store it with term2-acp --login; then sign in again."},
        {"id": "anthropic", "name": "Anthropic API key", "type": "agent",
         "description": "Set ANTHROPIC_API_KEY in the agent's environment (the editor's agent "
                        "settings), or store it with term2-acp --login; then sign in again."},
    ],
}
# Zed advertises auth.terminal: it also gets the terminal method (term2-acp --login)
TERMINAL_V1 = {"type": "terminal", "id": "term2-login", "name": "Enter an API key in a terminal",
               "args": ["--login"],
               "description": "Runs term2-acp --login: a short prompt that stores the key in "
                              "your term2acp config (auth.json, readable only by you)."}
V2_INIT = {"protocolVersion": 2, "info": {"name": "t", "version": "1"}}


@pytest.fixture
def fresh(acp_agent):
    """An agent that has not been initialized yet, checked against ``protocol``'s schema."""
    return lambda protocol=1: acp_agent(initialize=False, protocol=protocol)


def result_of(message):
    assert "result" in message, message
    return message["result"]


def error_of(message):
    assert "error" in message, message
    return message["error"]


# JetBrains AI Assistant, CodeCompanion, agent-shell / acpx / the registry probe
CLIENTS = {
    "zed": ZED_V1_INITIALIZE,
    "jetbrains": {"protocolVersion": 1,
                  "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True},
                                         "terminal": False},
                  "clientInfo": {"name": "JetBrains AI Assistant", "version": "253.1"}},
    "codecompanion": {"protocolVersion": 1, "clientCapabilities": {
        "fs": {"readTextFile": True, "writeTextFile": True}},
        "clientInfo": {"name": "CodeCompanion.nvim", "version": "17.0.0"}},
    "agent-shell": {"protocolVersion": 1, "clientInfo": {"name": "agent-shell", "version": "0.1"},
                    "clientCapabilities": {"fs": {"readTextFile": False,
                                                  "writeTextFile": False}}},
    "bare": {"protocolVersion": 1},
    "registry": {"protocolVersion": 1,
                 "clientInfo": {"name": "ACP Registry Validator", "version": "1.0.0"},
                 "clientCapabilities": {"terminal": True,
                                        "fs": {"readTextFile": True, "writeTextFile": True},
                                        "_meta": {"terminal_output": True,
                                                  "terminal-auth": True}}},
    "junk-optional-fields": {"protocolVersion": 1, "clientInfo": 5, "clientCapabilities": "x"},
}


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_v1_clients_get_the_v1_answer(fresh, client, acp_workspace):
    agent = fresh(1)
    expected = dict(V1_ANSWER, authMethods=V1_ANSWER["authMethods"] + (
        [TERMINAL_V1] if client in ("zed", "registry") else []))
    answer = result_of(agent.request("initialize", CLIENTS[client]))
    for method in answer["authMethods"]:  # its command line (tests/e2e/test_auth.py runs it)
        assert set(method.pop("_meta", {}).get("terminal-auth", {"label": ""})) <= {
            "command", "args", "label"}
    assert answer == expected
    # the connection now speaks v1: session/new needs no v2 field, session/load exists
    listed = result_of(agent.request("session/list", {}))
    assert listed == {"sessions": []}
    assert error_of(agent.request("session/load", {"sessionId": "nope", "cwd": acp_workspace,
                                                   "mcpServers": []}))["code"] == -32002
    assert agent.close() == 0


@pytest.mark.parametrize("version", [2, 3, 65535])
def test_version_2_and_above_get_todays_v2_answer(fresh, version):
    agent = fresh(2)
    assert result_of(agent.request("initialize", dict(V2_INIT, protocolVersion=version))) == {
        "protocolVersion": 2,
        "info": {"name": "term2", "title": "term2", "version": __version__},
        "capabilities": {"session": {"prompt": {"embeddedContext": {}},
                                 "mcp": {"stdio": {}, "http": {}},
                                 "fork": {}, "delete": {},
                                 "additionalDirectories": {}}},  # issues 28, 39
        "_meta": {"steering": {"supported": True}},
        "authMethods": [dict(m, methodId=m.pop("id")) for m in
                        [dict(m) for m in V1_ANSWER["authMethods"]]],
    }
    # v1-only methods do not exist on a v2 connection
    for method in ("session/load", "authenticate"):
        assert error_of(agent.request(method, {}))["code"] == -32601
    agent.close()


@pytest.mark.parametrize("version", [0, -1, 1.5, "1", True, None, 70000])
def test_no_version_or_a_bad_one_is_invalid_params_and_initialize_stays_possible(fresh, version):
    agent = fresh(1)
    params = {"protocolVersion": version, "clientInfo": {"name": "x", "version": "1"}}
    error = error_of(agent.request("initialize", params))
    assert error["code"] == -32602
    assert "protocolVersion" in error["message"] or "protocolVersion" in str(error.get("data"))
    assert error_of(agent.request("session/list", {}))["code"] == -32600  # not initialized
    assert result_of(agent.request("initialize", ZED_V1_INITIALIZE))["protocolVersion"] == 1
    agent.close()


def test_each_request_is_validated_against_the_version_it_names(fresh):
    v1 = fresh(1)
    # v1 fields only: never refused for lacking v2's "info"
    assert result_of(v1.request("initialize", {"protocolVersion": 1, "clientInfo": {
        "name": "x", "version": "1"}}))["protocolVersion"] == 1
    v1.close()
    v2 = fresh(2)
    # a v2 request with v1 field names still lacks "info"
    error = error_of(v2.request("initialize", {"protocolVersion": 2, "clientInfo": {
        "name": "x", "version": "1"}}))
    assert error["code"] == -32602 and "info" in error["data"]["errors"]
    v2.close()


@pytest.mark.parametrize("second", [V2_INIT, ZED_V1_INITIALIZE])
def test_the_version_is_fixed_after_initialize(fresh, second):
    agent = fresh(1)
    result_of(agent.request("initialize", ZED_V1_INITIALIZE))
    assert error_of(agent.request("initialize", second))["code"] == -32600
    assert error_of(agent.request("auth/login", {"methodId": "x"}))["code"] == -32601  # v2-only
    agent.close()


def test_authenticate_with_an_unknown_method_is_a_clear_error(fresh):
    """Superseded: "term2 has no authentication methods" (issue 15 added sign-in;
    tests/e2e/test_auth.py covers authenticate and logout)."""
    agent = fresh(1)
    agent.initialize()
    error = error_of(agent.request("authenticate", {"methodId": "anything"}))
    assert error["code"] == -32602
    assert "unknown authentication method" in error["message"] and "openai" in error["message"]
    agent.close()
