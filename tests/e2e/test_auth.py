"""Sign-in over the real launcher, on v1 and v2 (issue 15): authMethods (the terminal
method only for clients that advertise auth.terminal), ACP's auth-required error on a
prompt without a usable key, ``term2-acp --login`` storing the key with mode 0600,
``authenticate`` / ``auth/login`` seeing it, ``logout`` / ``auth/logout`` forgetting it,
and no key on the wire, in the log or in the store."""

import json
import os
import stat
import subprocess

import pytest

from term2acp.testing.harness import V2_INITIALIZE, ZED_V1_INITIALIZE, default_command
from tests.support import fake_llm as f
from tests.support.proxy import ConnectProxy

SECRET = "sk-stored-secret-0123456789"
HOST = "llm.fake.test"  # not loopback: the server needs a key; only the proxy resolves it


@pytest.fixture
def server():
    srv = f.FakeLLMServer(host=HOST).start()
    yield srv
    srv.stop()


@pytest.fixture
def proxy():
    made = ConnectProxy(hosts={HOST: "127.0.0.1"}).start()
    yield made
    made.stop()


@pytest.fixture
def keyless(server, proxy):
    return {"OPENAI_BASE_URL": server.openai_url, "TERM2ACP_LOCAL_MODEL": "off",
            "HTTP_PROXY": f"http://127.0.0.1:{proxy._server.server_port}", "NO_PROXY": ""}


def methods_of(agent):
    return agent.initialize()["authMethods"]


# the ACP registry's validator (and clients older than auth.terminal) say _meta terminal-auth
REGISTRY_V1_INITIALIZE = {
    "protocolVersion": 1, "clientInfo": {"name": "ACP Registry Validator", "version": "1.0.0"},
    "clientCapabilities": {"terminal": True, "fs": {"readTextFile": True, "writeTextFile": True},
                           "_meta": {"terminal_output": True, "terminal-auth": True}}}


@pytest.mark.parametrize("protocol, params, terminal", [
    (1, ZED_V1_INITIALIZE, True),
    (1, REGISTRY_V1_INITIALIZE, True),
    (1, {"protocolVersion": 1, "clientCapabilities": {"fs": {}, "terminal": False},
         "clientInfo": {"name": "JetBrains AI Assistant", "version": "1"}}, False),
    (2, dict(V2_INITIALIZE, capabilities={"auth": {"terminal": {}}}), True),
    (2, V2_INITIALIZE, False),
])
def test_auth_methods(acp_agent, protocol, params, terminal):
    agent = acp_agent(initialize=False, protocol=protocol)
    methods = agent.request("initialize", params)["result"]["authMethods"]
    key = "id" if protocol == 1 else "methodId"
    assert [m[key] for m in methods] == ["openai", "anthropic"] + (
        ["term2-login"] if terminal else [])
    assert "OPENAI_API_KEY" in methods[0]["description"]
    assert "ANTHROPIC_API_KEY" in methods[1]["description"]
    assert [m["type"] for m in methods[:2]] == ["agent", "agent"]  # what each one does
    if terminal:
        assert methods[2]["type"] == "terminal" and methods[2]["args"] == ["--login"]
    agent.close()


def test_the_terminal_sign_in_command_for_meta_clients_signs_in(acp_agent, acp_env, keyless):
    """Clients that read ``_meta["terminal-auth"]`` run its command line themselves."""
    agent = acp_agent(initialize=False, protocol=1, env=keyless)
    methods = agent.request("initialize", REGISTRY_V1_INITIALIZE)["result"]["authMethods"]
    command = methods[-1]["_meta"]["terminal-auth"]
    assert command["label"] == "term2-acp --login"
    done = subprocess.run([command["command"], *command["args"]], input=f"1\n{SECRET}\n",
                          env=dict(acp_env, **keyless), capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0, done.stderr
    stored = os.path.join(os.path.dirname(acp_env["TERM2ACP_CONFIG"]), "auth.json")
    assert SECRET in open(stored).read()
    agent.close()


def _prompt(agent, sid):
    return agent.request("session/prompt", {"sessionId": sid,
                                            "prompt": [{"type": "text", "text": "hi"}]})


def _login_in_a_terminal(env, answers):
    return subprocess.run(default_command() + ["--login"], input=answers, env=env,
                          capture_output=True, text=True, timeout=30)


@pytest.mark.acp_process  # the secret is looked for in a process's whole stderr
@pytest.mark.parametrize("protocol", [1, 2])
def test_auth_required_then_login_then_logout(acp_agent, acp_env, acp_workspace, server,
                                              keyless, protocol):
    login, logout = ("authenticate", "logout") if protocol == 1 else ("auth/login", "auth/logout")
    server.enqueue(f.openai_sse(f.oa_text("signed in"), f.oa_finish("stop")))
    agent = acp_agent(env=keyless, protocol=protocol)
    sid = agent.new_session(acp_workspace)
    error = _prompt(agent, sid)["error"]
    assert error["code"] == -32000 and error["data"]["authRequired"] is True
    assert "OPENAI_API_KEY" in error["message"]
    # nothing stored yet: signing in says what to do
    error = agent.request(login, {"methodId": "openai"})["error"]
    assert error["code"] == -32000 and "--login" in error["message"]
    assert agent.request(login, {"methodId": "nope"})["error"]["code"] == -32602

    done = _login_in_a_terminal(dict(acp_env, **keyless), f"1\n{SECRET}\n")
    assert done.returncode == 0, done.stderr
    stored = os.path.join(os.path.dirname(acp_env["TERM2ACP_CONFIG"]), "auth.json")
    assert stat.S_IMODE(os.stat(stored).st_mode) == 0o600
    assert SECRET in open(stored).read() and SECRET not in done.stdout

    assert agent.request(login, {"methodId": "openai"})["result"] == {}
    if protocol == 1:
        assert _prompt(agent, sid)["result"]["stopReason"] == "end_turn"
    else:
        assert _prompt(agent, sid)["result"] == {}
        end = agent.wait_update(state="idle", session_id=sid)
        assert end["stopReason"] == "end_turn"
    request = server.wait_requests(1)[0]
    assert request.headers["authorization"] == f"Bearer {SECRET}"

    assert agent.request(logout, {})["result"] == {}
    assert SECRET not in open(stored).read()
    assert _prompt(agent, sid)["error"]["code"] == -32000
    agent.close()
    wire = b"".join(agent.lines).decode()
    assert SECRET not in wire and SECRET not in agent.stderr
    for name in os.listdir(acp_env["TERM2ACP_HOME"]):
        path = os.path.join(acp_env["TERM2ACP_HOME"], name)
        if os.path.isfile(path):
            assert SECRET.encode() not in open(path, "rb").read(), name


def test_login_refuses_a_bad_choice_and_stores_nothing(acp_env, keyless):
    done = _login_in_a_terminal(dict(acp_env, **keyless), "9\n")
    assert done.returncode == 1
    assert not os.path.exists(os.path.join(os.path.dirname(acp_env["TERM2ACP_CONFIG"]),
                                           "auth.json"))


def test_login_is_the_one_new_flag(acp_env):
    for argv in (["--login", "--model", "x"], ["--logout"], ["--log"]):
        done = subprocess.run(default_command() + argv, env=acp_env, capture_output=True,
                              text=True, timeout=30, stdin=subprocess.DEVNULL)
        assert done.returncode == 1 and done.stdout == "", argv


def test_a_usable_key_in_the_environment_needs_no_sign_in(acp_agent, acp_workspace, server,
                                                          keyless):
    server.enqueue(f.openai_sse(f.oa_text("ok"), f.oa_finish("stop")))
    agent = acp_agent(env=dict(keyless, OPENAI_API_KEY="sk-env-key-123"))
    sid = agent.new_session(acp_workspace)
    _, _, idle = agent.prompt(sid, "hi")
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    assert agent.request("auth/login", {"methodId": "openai"})["result"] == {}
    agent.close()


REGISTRY_VALIDATOR_INITIALIZE = {  # what the ACP registry's CI sends (its auth check)
    "protocolVersion": 1, "clientInfo": {"name": "ACP Registry Validator", "version": "1.0.0"},
    "clientCapabilities": {"terminal": True, "fs": {"readTextFile": True, "writeTextFile": True},
                           "_meta": {"terminal_output": True, "terminal-auth": True}}}


def test_auth_methods_pass_the_acp_registry_check_with_no_key(acp_agent):
    """The registry lists agents whose initialize offers an ``agent`` or ``terminal`` auth
    method (a method without a type is an ``agent`` one), run with an empty HOME."""
    agent = acp_agent(initialize=False, protocol=1, env={"TERM2ACP_LOCAL_MODEL": "off"})
    methods = agent.request("initialize", REGISTRY_VALIDATOR_INITIALIZE)["result"]["authMethods"]
    assert any(m.get("type", "agent") in ("agent", "terminal") for m in methods), methods


def test_logins_at_the_same_time_merge_their_keys(acp_env, keyless, tmp_path):
    # Issue 23: each run read auth.json, added its key and replaced the file; a run that
    # read before another replaced it put the older copy back and lost that key.
    runs = 8
    config = "".join(f'[providers.p{n}]\ntype = "openai"\nbase_url = "https://p{n}.example/v1"\n'
                      f'api_key_env = "P{n}_KEY"\n' for n in range(runs - 2))
    with open(acp_env["TERM2ACP_CONFIG"], "w") as fh:
        fh.write(config)
    env = dict(acp_env, **keyless)
    procs = [subprocess.Popen(default_command() + ["--login"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
             for _ in range(runs)]
    try:
        for proc in procs:  # every run waits at its first question, then all answer at once
            seen = b""
            while b"Provider [" not in seen:
                chunk = proc.stderr.read1(4096)
                assert chunk, seen
                seen += chunk
        for number, proc in enumerate(procs, 1):
            proc.stdin.write(f"{number}\nsk-key-{number}-abcdefgh\n".encode())
            proc.stdin.flush()
        for proc in procs:
            proc.stdin.close()
        assert [proc.wait(timeout=60) for proc in procs] == [0] * runs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    stored = os.path.join(os.path.dirname(acp_env["TERM2ACP_CONFIG"]), "auth.json")
    keys = json.load(open(stored))["keys"]
    assert sorted(keys.values()) == sorted(f"sk-key-{n}-abcdefgh" for n in range(1, runs + 1))
