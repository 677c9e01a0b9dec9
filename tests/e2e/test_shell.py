"""The sandboxed shell through the real launcher: writes stay in the root, cancel kills the
tree, output streams as terminal updates, and no sandbox means refusal, never a fallback."""

import base64
import os
import shutil

import pytest


pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None and not os.environ.get("CI"),
                                reason="bubblewrap is not installed")


def shell(command, **extra):
    return {"tool_call": {"name": "shell", "arguments": dict(command=command, **extra)}}


def terminal_output(updates):
    return b"".join(base64.b64decode(u["data"]) for u in updates
                    if u["sessionUpdate"] == "terminal_output_chunk").decode()


@pytest.mark.parametrize("sandbox", [None, "unsandboxed"])  # no such parameter: ignored
def test_shell_writes_only_inside_the_root(started, workspace, tmp_path, sandbox):
    sibling = tmp_path / "sibling"
    sibling.mkdir()
    extra = {"sandbox": sandbox} if sandbox else {}
    command = (f"echo inside > in.txt; echo out > {sibling}/x.txt; echo up > ../up.txt; "
               "echo home > ~/home-file.txt; echo etc > /etc/t2acp-e2e; echo done")
    agent, sid = started([[shell(command, **extra)], [{"text": "ok"}]])
    asked = []
    _, updates, idle = agent.prompt(sid, "go", on_request=lambda m: asked.append(m))
    assert asked == []  # sandboxed commands need no approval, "unsandboxed" is downgraded
    assert open(os.path.join(workspace, "in.txt")).read() == "inside\n"
    assert not (sibling / "x.txt").exists() and not (tmp_path / "up.txt").exists()
    assert not os.path.exists("/etc/t2acp-e2e")
    assert not os.path.exists(os.path.expanduser("~/home-file.txt"))
    assert "done" in terminal_output(updates)
    first = next(u for u in updates if u["sessionUpdate"] == "tool_call_update")
    assert first["kind"] == "execute"
    done = [u for u in updates if u["sessionUpdate"] == "tool_call_update" and u.get("status") == "completed"]
    assert done[0]["content"][0]["type"] == "terminal"
    exits = [u for u in updates if u["sessionUpdate"] == "terminal_update" and "exitStatus" in u]
    assert exits[0]["exitStatus"] == {"exitCode": 0}
    agent.close()


def test_shell_failure_is_a_failed_tool_call_with_the_exit_code(started):
    agent, sid = started([[shell("echo oops >&2; exit 3")], [{"text": "ok"}]])
    _, updates, _ = agent.prompt(sid, "go")
    failed = [u for u in updates if u["sessionUpdate"] == "tool_call_update" and u.get("status") == "failed"]
    assert failed and "oops" in terminal_output(updates)
    exits = [u for u in updates if u["sessionUpdate"] == "terminal_update" and "exitStatus" in u]
    assert exits[0]["exitStatus"] == {"exitCode": 3}
    agent.close()


def test_cancel_kills_the_whole_process_tree(started, workspace, tmp_path):
    marker = os.path.join(workspace, "survivor")
    command = (f"(setsid nohup sh -c 'sleep 2; echo alive > {marker}' >/dev/null 2>&1 &); "
               "trap '' TERM; echo started; sleep 60")
    agent, sid = started([[shell(command)], [{"text": "never"}]])
    agent.prompt_async(sid, "go")
    agent.wait_update("terminal_output_chunk", timeout=20)
    agent.notify("session/cancel", {"sessionId": sid})
    idle = agent.wait_update(state="idle", timeout=10)
    assert idle["stopReason"] == "cancelled"
    statuses = [m["params"]["update"].get("status") for m in agent.messages
                if m.get("method") == "session/update"
                and m["params"]["update"]["sessionUpdate"] == "tool_call_update"]
    assert statuses[-1] == "cancelled"
    # the setsid grandchild would write after 2 s; prove it is gone by the pid namespace
    # having died: a later command in a fresh sandbox sees no marker after the same wait
    agent.close()
    import time

    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and not os.path.exists(marker):
        time.sleep(0.1)
    assert not os.path.exists(marker)


def test_shell_timeout_kills_and_fails(started):
    agent, sid = started([[shell("sleep 30", timeout=0.5)], [{"text": "ok"}]])
    _, updates, _ = agent.prompt(sid, "go", timeout=30)
    failed = [u for u in updates if u["sessionUpdate"] == "tool_call_update" and u.get("status") == "failed"]
    assert len(failed) == 1
    exits = [u for u in updates if u["sessionUpdate"] == "terminal_update" and "exitStatus" in u]
    assert exits[0]["exitStatus"] == {"signal": "SIGKILL"}
    agent.close()


def test_no_sandbox_means_refusal_and_a_startup_warning(started, workspace):
    agent, sid = started([[shell("echo ran > ran.txt")], [{"text": "ok"}]],
                     env={"TERM2ACP_BWRAP": "/nonexistent/bwrap"})
    _, updates, _ = agent.prompt(sid, "go")
    failed = [u for u in updates if u["sessionUpdate"] == "tool_call_update" and u.get("status") == "failed"]
    assert failed and "sandbox" in failed[0]["content"][0]["content"]["text"].lower()
    assert not os.path.exists(os.path.join(workspace, "ran.txt"))
    agent.close()
    assert "shell sandbox unavailable:" in agent.stderr
    assert "shell tool calls will be refused" in agent.stderr


def test_secrets_do_not_reach_the_sandbox(started):
    agent, sid = started([[shell("env")], [{"text": "ok"}]],
                     env={"OPENAI_API_KEY": "sk-should-not-leak-123", "MY_TOKEN": "tok-456"})
    _, updates, _ = agent.prompt(sid, "go")
    output = terminal_output(updates)
    assert "sk-should-not-leak-123" not in output and "tok-456" not in output
    agent.close()


def test_eof_during_a_command_leaves_no_process_behind(started, workspace):
    import random

    pidfile = os.path.join(workspace, "pids")
    nap = f"120.{random.randrange(10**6)}"  # unique, so parallel runs cannot confuse us
    command = (f"(setsid nohup sleep {nap} >/dev/null 2>&1 & echo $! >> {pidfile}); "
               f"echo $$ >> {pidfile}; echo started; sleep {nap}")
    agent, sid = started([[shell(command)], [{"text": "never"}]])
    agent.prompt_async(sid, "go")
    agent.wait_update("terminal_output_chunk", timeout=20)
    with open(pidfile) as fh:  # written before the command's first output
        assert len(fh.read().split()) == 2
    agent.close_stdin()
    assert agent.wait(10) == 0
    # the pids were recorded inside the sandbox's pid namespace; on the host, no `sleep`
    # started by this test may survive the agent
    survivors = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    if fh.read() == f"sleep\x00{nap}\x00".encode():
                        survivors.append(entry)
            except OSError:
                pass
    assert survivors == []


@pytest.fixture
def target(tmp_path):
    """A host directory outside the session root, not under /tmp (private in the sandbox)."""
    import tempfile

    path = tempfile.mkdtemp(prefix="t2acp-attack-", dir="/var/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


ATTACKS = {
    "proc_self_root": "echo x > /proc/self/root{target}/pwned",
    "symlink_in_root": "ln -s {target} link && echo x > link/pwned",
    "remount_rw": "mount -o remount,rw / 2>/dev/null; mount -o remount,rw {target} 2>/dev/null; "
                  "echo x > {target}/pwned",
    "unshare": "unshare -r sh -c 'echo x > {target}/pwned' 2>/dev/null; "
               "unshare -U -m sh -c 'mount -o remount,rw / && echo x > {target}/pwned' 2>/dev/null; true",
    "dotdot": "cd .. && echo x > {target}/pwned; echo x > ../pwned-sibling",
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_shell_attacks_write_nothing_outside_the_root(started, workspace, target, attack):
    command = ATTACKS[attack].format(target=target) + "; echo finished"
    agent, sid = started([[shell(command)], [{"text": "ok"}]])
    _, updates, _ = agent.prompt(sid, "go", timeout=30)
    assert "finished" in terminal_output(updates), updates
    assert os.listdir(target) == []  # checked on the host filesystem
    assert not os.path.exists(os.path.join(os.path.dirname(workspace), "pwned-sibling"))
    agent.close()


def test_shell_reads_outside_but_credentials_and_agent_config_are_invisible(started, agent_env, tmp_path):
    home = tmp_path / "fakehome"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY MATERIAL")
    config = tmp_path / "config.toml"
    config.write_text('provider = "scripted"  # sk-config-secret-999\n')
    agent, sid = started([[shell(f"cat /etc/hostname >/dev/null && echo readable; "
                             f"cat {home}/.ssh/id_ed25519; cat {config}; echo end")], [{"text": "ok"}]],
                     env={"HOME": str(home), "TERM2ACP_CONFIG": str(config)})
    _, updates, _ = agent.prompt(sid, "go", timeout=30)
    output = terminal_output(updates)
    assert "readable" in output and "end" in output
    assert "PRIVATE KEY MATERIAL" not in output and "sk-config-secret-999" not in output
    agent.close()


def test_shell_network_is_off(started):
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        probe = ("python3 -c \"import socket,sys\n"
                 "try:\n socket.create_connection(('127.0.0.1', %d), timeout=2); print('connected')\n"
                 "except OSError as e: print('refused', e)\"" % port)
        agent, sid = started([[shell(probe)], [{"text": "ok"}]])
        _, updates, _ = agent.prompt(sid, "go", timeout=30)
        output = terminal_output(updates)
        assert "refused" in output and "connected" not in output
        agent.close()
    finally:
        server.close()


@pytest.mark.parametrize("command, timeout", [
    ("head -c 268435456 /dev/zero | tr '\\0' x; echo", 120),  # 256 MiB: 4x the bound below
    ("f() { f | f & }; f; sleep 3", 2),  # fork bomb, ended by the timeout
])
def test_floods_keep_the_agent_responsive(started, command, timeout):
    agent, sid = started([[shell(command, timeout=timeout)], [{"text": "survived"}]])
    agent.prompt_async(sid, "flood")
    agent.wait_update("terminal_update", timeout=20)
    # while the command floods, the agent still answers other requests promptly
    listed = agent.request("session/list", {}, timeout=10)
    assert listed["result"]["sessions"]
    assert not any(m.get("method") == "session/update" and m["params"]["update"].get("state") == "idle"
                   for m in agent.messages)  # answered before the flood ended
    idle = agent.wait_update(state="idle", timeout=timeout + 60)
    assert idle["stopReason"] == "end_turn"
    streamed = sum(len(u["params"]["update"]["data"]) for u in agent.messages
                   if u.get("method") == "session/update"
                   and u["params"]["update"]["sessionUpdate"] == "terminal_output_chunk")
    assert streamed < 64 * 2**20  # the editor gets a bounded share, not a gigabyte of JSON
    agent.close()


def test_run_code_nested_calls_are_reported_and_approved_through_the_bridge(started, workspace, tmp_path):
    with open(os.path.join(workspace, "inside.txt"), "w") as fh:
        fh.write("inside text\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "o.txt").write_text("outside text\n")
    code = ("print(tools.read_file(path='inside.txt'))\n"
            "try:\n"
            f"    tools.read_file(path='{outside}/o.txt')\n"
            "except ToolCallError as e:\n"
            "    print('denied:', e)\n"
            "try:\n"
            "    tools.shell(command='true')\n"
            "except ToolCallError as e:\n"
            "    print('refused:', e)\n")
    agent, sid = started([[{"tool_call": {"name": "run_code", "arguments": {"code": code}}}], [{"text": "ok"}]])
    asked = []
    _, updates, idle = agent.prompt(sid, "go", timeout=60, on_request=lambda m: asked.append(m) or
                                    {"outcome": {"outcome": "selected", "optionId": "reject"}})
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    assert len(asked) == 1 and asked[0]["params"]["subject"]["toolCall"]["rawInput"]["path"].endswith("o.txt")
    output = terminal_output(updates)
    assert "inside text" in output and "denied:" in output and "refused:" in output
    assert "outside text" not in output
    names = [u.get("name") for u in updates if u["sessionUpdate"] == "tool_call_update" and u.get("name")]
    assert names.count("read_file") == 2 and "run_code" in names  # nested calls are their own
    agent.close()


# --- issue 10 items 6-8 and the memory bound, through the launcher -------------------------

SECRET = "TOKEN-e2e-should-not-leak"


@pytest.fixture
def host(tmp_path):
    """A fake home and a sibling project on the host, outside /tmp (private in the sandbox)."""
    import tempfile

    base = os.path.realpath(tempfile.mkdtemp(prefix="t2acp-e2e-", dir="/var/tmp"))
    files = {"home/.bashrc": f"export GH_TOKEN={SECRET}\n", "home/.env": f"API={SECRET}\n",
             "home/.config/tool/auth.json": f'{{"token": "{SECRET}"}}',
             "home/.ssh/id_rsa": SECRET, "home/notes.txt": SECRET,
             "home/.pyenv/version": "3.11-from-pyenv\n", "sibling/main.py": SECRET,
             "home/project/readme.md": "project readme\n"}
    for rel, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(base, rel)), exist_ok=True)
        with open(os.path.join(base, rel), "w") as fh:
            fh.write(text)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def test_shell_reads_no_home_secrets_sibling_or_shadow(started, host):
    home = os.path.join(host, "home")
    reads = " ".join(os.path.join(home, rel) for rel in (
        ".bashrc", ".env", ".config/tool/auth.json", ".ssh/id_rsa", "notes.txt"))
    command = (f"cat {reads} {host}/sibling/main.py /etc/shadow /etc/gshadow; "
               "cat ~/.pyenv/version; echo end")
    agent, sid = started([[shell(command)], [{"text": "ok"}]], env={"HOME": home})
    asked = []
    _, updates, _ = agent.prompt(sid, "go", timeout=30, on_request=asked.append)
    output = terminal_output(updates)
    assert "3.11-from-pyenv" in output and "end" in output  # the toolchain is readable
    assert SECRET not in output and "root:" not in output
    assert asked == []
    agent.close()


def test_shell_at_home_root_masks_credentials(started, host):
    home = os.path.join(host, "home")
    agent, _ = started([[shell("cat .bashrc .env .ssh/id_rsa .config/tool/auth.json; "
                               "cat project/readme.md; echo end")], [{"text": "ok"}]],
                       env={"HOME": home})
    response = agent.request("session/new", {"cwd": home})
    assert "result" in response, response  # a home root is allowed; its secrets are not
    _, updates, _ = agent.prompt(response["result"]["sessionId"], "go", timeout=30)
    output = terminal_output(updates)
    assert "project readme" in output and "end" in output
    assert SECRET not in output
    agent.close()


@pytest.mark.parametrize("root", ["/", "/tmp"])
def test_root_slash_gives_a_clear_message(started, root):
    agent, _ = started([[shell("echo ran")], [{"text": "ok"}]])
    response = agent.request("session/new", {"cwd": root})
    if "error" in response:  # session/new refuses / itself
        assert response["error"]["code"] == -32602
        assert "bwrap" not in response["error"]["message"]
        agent.close()
        return
    _, updates, _ = agent.prompt(response["result"]["sessionId"], "go", timeout=30)
    failed = [u for u in updates if u["sessionUpdate"] == "tool_call_update"
              and u.get("status") == "failed"]
    text = failed[0]["content"][0]["content"]["text"]
    assert f"workspace root is {root}" in text and "bwrap" not in text
    assert "ran" not in terminal_output(updates)
    agent.close()


def test_host_sockets_and_fifos_outside_fail_inside_work(started, workspace, host):
    import socket

    outside_sock, outside_fifo = f"{host}/sibling/app.sock", f"{host}/sibling/pipe"
    inside_sock = os.path.join(workspace, "dev.sock")
    servers = []
    for path in (outside_sock, inside_sock):
        server = socket.socket(socket.AF_UNIX)
        server.bind(path)
        os.chmod(path, 0o777)
        server.listen(4)
        server.setblocking(False)
        servers.append(server)
    os.mkfifo(outside_fifo)
    reader = os.open(outside_fifo, os.O_RDONLY | os.O_NONBLOCK)
    connect = ("python3 -c \"import socket,sys; s=socket.socket(socket.AF_UNIX); "
               "s.connect(sys.argv[1]); s.sendall(b'PING'); print('CONNECTED', sys.argv[1])\"")
    command = (f"{connect} {outside_sock}; {connect} {inside_sock}; "
               f"[ -p {outside_fifo} ] && echo FIFO-VISIBLE; echo {SECRET} > {outside_fifo}; "
               "mkfifo p && { cat p > got & echo through > p; wait; }; cat got; echo end")
    try:
        agent, sid = started([[shell(command)], [{"text": "ok"}]])
        _, updates, _ = agent.prompt(sid, "go", timeout=30)
        output = terminal_output(updates)
        assert "end" in output and "through" in output  # a FIFO inside the workspace works
        assert f"CONNECTED {inside_sock}" in output and f"CONNECTED {outside_sock}" not in output
        assert "FIFO-VISIBLE" not in output
        conn, _ = servers[1].accept()  # the inside connection is really there
        conn.close()
        with pytest.raises(BlockingIOError):
            servers[0].accept()  # nothing ever reached the outside socket
        try:
            assert os.read(reader, 100) == b""
        except BlockingIOError:
            pass
        agent.close()
    finally:
        os.close(reader)
        for server in servers:
            server.close()


def test_memory_and_tmpfs_bounds_keep_the_agent_healthy(started):
    gib3 = 3 * 1024 ** 3
    command = (f"python3 -c \"b = bytearray({gib3}); print('ALLOCATED')\"; "
               f"head -c {gib3} /dev/zero > /tmp/big || echo TMP-FULL; rm -f /tmp/big; "
               f"head -c {gib3} /dev/zero > /dev/shm/big || echo SHM-FULL; echo end")
    agent, sid = started([[shell(command, timeout=120)], [{"text": "first"}],
                          [shell("echo alive")], [{"text": "second"}]])
    _, updates, idle = agent.prompt(sid, "go", timeout=150)
    output = terminal_output(updates)
    assert "end" in output and "ALLOCATED" not in output
    assert "TMP-FULL" in output and "SHM-FULL" in output
    assert agent.request("session/list", {}, timeout=10)["result"]["sessions"]
    _, updates, _ = agent.prompt(sid, "again", timeout=30)
    assert "alive" in terminal_output(updates)
    agent.close()
