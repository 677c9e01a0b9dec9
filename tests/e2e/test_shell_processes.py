"""Background processes through the launcher, v1 and v2, with the fake model server making
the calls: a server one call starts is reached by the next call, read with shell_output
and ended with shell_kill; a tty process answers typed input; nothing outlives a kill -9
of the agent."""

import base64
import contextlib
import json
import os
import random
import shutil
import signal
import time

import gevent
import pytest

from tests.support import fake_llm as f

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None and not os.environ.get("CI"),
                                reason="bubblewrap is not installed")


def calls(server, *rounds):
    """One model answer per round: the tool calls ``(name, arguments)``; then a text."""
    for number, round_calls in enumerate(rounds):
        chunks = [f.oa_tool(i, f"call_{number}_{i}", name, json.dumps(args))
                  for i, (name, args) in enumerate(round_calls)]
        server.enqueue(f.openai_sse(*chunks, f.oa_finish("tool_calls")))
    server.enqueue(f.openai_sse(f.oa_text("done"), f.oa_finish("stop")))


def agent_on(spawn_any, server, protocol):
    env = {"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "sk-test-key-123456"}
    agent = spawn_any(protocol, "--provider", "openai", "--model", "my-local-model", env=env)
    agent.initialize()
    return agent


@pytest.fixture
def spawn_any(acp_agent, agent_env):
    """``spawn_any(protocol, *args, env=...)``: an agent speaking that ACP version."""
    def start(protocol, *args, env=None):
        return acp_agent(args=args, env=dict(agent_env, **(env or {})), initialize=False,
                         protocol=protocol)
    return start


def tool_results(server, count):
    """What the model was told by each tool call, in order (the last request's history)."""
    last = server.wait_requests(count)[-1].json
    return [m["content"] for m in last["messages"] if m["role"] == "tool"]


def host_processes(token):
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    cmdline = fh.read()
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    state = fh.read().rsplit(b")", 1)[1].split()[0]
            except OSError:
                continue
            if token.encode() in cmdline and state != b"Z":
                found.append(int(entry))
    return found


def gone(token, timeout):
    deadline = time.monotonic() + timeout
    while host_processes(token):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def chunks_of(updates):
    out = {}
    for u in updates:
        if u["sessionUpdate"] == "terminal_output_chunk":
            out[u["terminalId"]] = out.get(u["terminalId"], b"") + base64.b64decode(u["data"])
    return out


@pytest.mark.parametrize("protocol", [2, 1])
def test_a_background_server_is_reached_read_and_killed(spawn_any, server, workspace, protocol):
    port = random.randrange(20000, 60000)  # the session's loopback is private: any port
    with open(os.path.join(workspace, "hello.txt"), "w") as fh:
        fh.write("hello from the workspace\n")
    serve = f"python3 -m http.server {port} --bind 127.0.0.1"
    fetch = (f"for i in $(seq 200); do curl -sf http://127.0.0.1:{port}/hello.txt && exit; "
             "sleep 0.05; done; exit 7")  # bounded: the server may take a moment to listen
    calls(server, [("shell", {"command": serve, "background": True})],
          [("shell", {"command": fetch})],
          [("shell_output", {"process_id": "p1", "wait_seconds": 20})],
          [("shell_kill", {"process_id": "p1"})])
    agent = agent_on(spawn_any, server, protocol)
    sid = agent.new_session(workspace)
    _, updates, _ = agent.prompt(sid, "serve and fetch", timeout=60)
    started, fetched, read, killed = tool_results(server, 5)
    assert "process p1" in started and "is running" in started
    assert "hello from the workspace" in fetched and "exit code 0" in fetched
    assert "GET /hello.txt" in read and "Process p1 is running." in read
    assert "exited with code 143" in killed  # it ended on the SIGTERM shell_kill sends first
    assert gone(serve, timeout=2)
    texts = json.dumps([u for u in updates if u["sessionUpdate"] == "tool_call_update"])
    assert "GET /hello.txt" in texts  # shell_output shows what it read
    if protocol == 2:  # the process's terminal streams there, anchored in the first call
        terminal = next(u["terminalId"] for u in updates if u["sessionUpdate"] == "terminal_update"
                        and u.get("command") == serve)
        assert b"GET /hello.txt" in chunks_of(updates)[terminal]
        exits = [u["exitStatus"] for u in updates if u["sessionUpdate"] == "terminal_update"
                 and u["terminalId"] == terminal and "exitStatus" in u]
        assert exits == [{"exitCode": 143}]
        anchors = [u for u in updates if u["sessionUpdate"] == "tool_call_update"
                   and u.get("status") == "completed"
                   and {"type": "terminal", "terminalId": terminal} in (u.get("content") or [])]
        assert len(anchors) == 1
    assert agent.close() == 0


@pytest.mark.parametrize("protocol", [2, 1])
def test_a_tty_process_answers_typed_input(spawn_any, server, workspace, protocol):
    ask = "python3 -c \"print('hi', input('name? '))\""
    calls(server, [("shell", {"command": ask, "background": True, "tty": True})],
          [("shell_output", {"process_id": "p1", "input": "bob\n", "wait_seconds": 20})],
          [("shell_output", {"process_id": "p1", "wait_seconds": 20})],
          [("shell_output", {"process_id": "p1", "input": "more\n"})])
    agent = agent_on(spawn_any, server, protocol)
    sid = agent.new_session(workspace)
    agent.prompt(sid, "ask me", timeout=60)
    started, answered, rest, late = tool_results(server, 5)
    assert "with a terminal" in started
    # the answer normally comes with the exit; a slow machine may split it in two reads
    assert "hi bob\n" in answered + rest and "exited with code 0" in answered + rest
    assert "reads no more input" in late
    assert agent.close() == 0


def test_limits_are_clear_tool_errors(spawn_any, server, workspace, tmp_path):
    with open(tmp_path / "config.toml", "w") as fh:
        fh.write("[shell]\nmax_processes = 1\n")
    calls(server, [("shell", {"command": "sleep 30.4242", "background": True})],
          [("shell", {"command": "sleep 30.4243", "background": True})],
          [("shell_output", {"process_id": "p9"})],
          [("shell", {"command": "sleep 1", "background": True, "timeout": 3})])
    agent = agent_on(spawn_any, server, 2)
    sid = agent.new_session(workspace)
    agent.prompt(sid, "go", timeout=60)
    first, second, unknown, timeout = tool_results(server, 5)
    assert "process p1" in first
    assert "limit ([shell] max_processes = 1)" in second and "shell_kill" in second
    assert "no background process 'p9'" in unknown
    assert "timeout does not apply" in timeout
    assert agent.close() == 0
    assert gone("sleep 30.4242", timeout=2)  # the session's close ended it


def test_the_process_limit_holds_within_one_round(spawn_any, server, workspace, tmp_path):
    """Four background starts in one answer with ``max_processes = 1``: one runs, three
    are refused (the slot is taken before the start, not after it returns)."""
    with open(tmp_path / "config.toml", "w") as fh:
        fh.write("[shell]\nmax_processes = 1\n")
    token = "sleep 30.%d" % random.randrange(10**6)
    calls(server, [("shell", {"command": f"{token}{i}", "background": True})
                   for i in range(4)])
    agent = agent_on(spawn_any, server, 2)
    sid = agent.new_session(workspace)
    agent.prompt(sid, "go", timeout=60)
    results = tool_results(server, 2)
    assert sum("Started" in r for r in results) == 1, results
    assert sum("limit ([shell] max_processes = 1)" in r for r in results) == 3, results
    assert len([i for i in range(4) if host_processes(f"{token}{i}")]) == 1  # one start
    assert agent.close() == 0
    assert gone(token, timeout=2)


def states(pids):
    out = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                out.add(fh.read().rsplit(b")", 1)[1].split()[0].decode())
        except OSError:
            pass
    return out


@pytest.mark.parametrize("protocol", [2, 1])
def test_read_only_and_plan_pause_the_background_processes(spawn_any, server, workspace,
                                                           protocol):
    """Switching to read-only (or plan) stops the session's background processes, whole
    trees, and says so; switching to auto lets them go on."""
    token = "30.%d" % random.randrange(10**6)
    calls(server, [("shell", {"command": f"sleep {token} & sleep {token}1; wait",
                              "background": True})])
    agent = agent_on(spawn_any, server, protocol)
    sid = agent.new_session(workspace)
    agent.prompt(sid, "go", timeout=60)
    assert wait_for(lambda: len(host_processes(token)) >= 5, 10)  # bwrap, sh, two sleeps
    pids = host_processes(token)

    def switch(mode):
        start = len(agent.messages)
        response = agent.request("session/set_config_option",
                                 {"sessionId": sid, "configId": "mode", "value": mode})
        assert "result" in response, response
        return "".join(m["params"]["update"]["content"]["text"] for m in agent.messages[start:]
                       if m.get("method") == "session/update" and m["params"]["update"][
                           "sessionUpdate"] in ("agent_message_chunk", "agent_message")
                       and isinstance(m["params"]["update"].get("content"), dict))

    told = switch("read-only")
    assert "Paused this session's background process" in told, told
    assert states(pids) == {"T"}
    assert switch("plan") == ""  # still paused, nothing new to say
    assert states(pids) == {"T"}
    told = switch("auto")
    assert "continue" in told and wait_for(lambda: "T" not in states(pids), 10)
    assert agent.close() == 0
    assert gone(token, timeout=2)


def wait_for(predicate, timeout):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_a_foreground_command_waiting_for_input_times_out_with_a_hint(spawn_any, server,
                                                                      workspace):
    # the timeout also covers the sandbox's start (seconds on a loaded machine)
    calls(server, [("shell", {"command": "echo asking; read answer", "tty": True,
                              "timeout": 4})])
    agent = agent_on(spawn_any, server, 2)
    sid = agent.new_session(workspace)
    agent.prompt(sid, "go", timeout=60)
    (result,) = tool_results(server, 2)
    assert "asking" in result and "timed out after 4s" in result
    assert "background: true" in result and "input" in result
    assert agent.close() == 0


@pytest.mark.acp_process
def test_kill_9_of_the_agent_leaves_no_sandboxed_process(spawn_any, server, workspace):
    background, foreground = "sleep 91.%d" % random.randrange(10**6), \
        "sleep 92.%d" % random.randrange(10**6)
    calls(server, [("shell", {"command": background, "background": True})],
          [("shell", {"command": f"echo started; {foreground}"})])
    agent = agent_on(spawn_any, server, 2)
    sid = agent.new_session(workspace)
    agent.prompt_async(sid, "go")
    agent.wait_update("terminal_output_chunk", timeout=30)  # the foreground one's "started"
    assert wait_for(lambda: host_processes(background) and host_processes(foreground), 10)
    os.kill(agent.proc.pid, signal.SIGKILL)
    agent.proc.wait(5)
    # the tokens are in the sandboxes' bwrap command lines too: those are gone as well
    assert gone(background, timeout=2) and gone(foreground, timeout=2)


@pytest.mark.acp_process
@pytest.mark.parametrize("attempt", range(3))
def test_kill_9_while_the_sandbox_appears_leaves_nothing(spawn_any, server, workspace, attempt):
    """The agent is killed while a command's sandbox is being made: everything of it found
    by then is stopped (so it is caught wherever it was), the agent gets SIGKILL, the rest
    is let go on. Neither bwrap nor the command may outlive it."""
    token = "94.%d" % random.randrange(10**6)
    calls(server, [("shell", {"command": f"sleep {token}", "background": True})])
    agent = agent_on(spawn_any, server, 2)
    sid = agent.new_session(workspace)
    agent.prompt_async(sid, "go")
    deadline = time.monotonic() + 30
    while not host_processes(token):  # bwrap has started
        assert time.monotonic() < deadline, "the sandbox did not appear"
        gevent.sleep(0)  # the model server answers from this process
    stopped = set()
    for _ in range(attempt):  # later and later in the sandbox's making
        host_processes(token)
    while set(host_processes(token)) - stopped:
        for pid in set(host_processes(token)) - stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
            stopped.add(pid)
    os.kill(agent.proc.pid, signal.SIGKILL)
    agent.proc.wait(5)
    for pid in stopped:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    assert gone(token, timeout=5), [open(f"/proc/{p}/cmdline").read()[:60]
                                    for p in host_processes(token)]


def test_an_agents_start_up_ends_what_a_dead_agent_left(spawn_any, server, agent_env):
    """A sandbox whose parent-death signal never came (recorded by an agent that is gone)
    is killed when the next agent on the same data directory starts."""
    import subprocess

    token = "sleep 93.%d" % random.randrange(10**6)
    left = subprocess.Popen(["/bin/sh", "-c", f"exec {token}"])
    try:
        with open(f"/proc/{left.pid}/stat", "rb") as fh:
            start = fh.read().rsplit(b")", 1)[1].split()[19].decode()
        folder = os.path.join(agent_env["TERM2ACP_HOME"], "sandboxes")
        os.makedirs(folder)
        with open(os.path.join(folder, "999999999-1"), "w") as fh:  # an agent that is gone
            fh.write(f"{left.pid} {start}\n")
        agent = agent_on(spawn_any, server, 2)
        assert left.wait(10) == -signal.SIGKILL  # bounded; the start-up sweeps
        assert os.listdir(folder) == []
        assert agent.close() == 0
    finally:
        left.kill()
        left.wait()
