"""Interop: acpx (a third-party headless ACP client, from npm) drives bin/term2-acp.

acpx keeps its sessions in ``$HOME/.acpx`` and runs the agent under a queue owner that
stays up for ``--ttl`` seconds, so one scenario covers what its users do: create a session,
a turn with a tool call that needs a permission (answered by ``--approve-all``), reopening
the session in a new agent process (``session/resume``) with its history, and a turn
cancelled with ``acpx cancel`` from another process. Every step must exit 0 and no answer
on the wire may be an error. Needs ``node`` and ``npm install`` in tests/interop.
"""

import json
import os
import queue
import shlex
import subprocess
import sys
import threading

import pytest

from tests.interop.test_interop import HERE, LAUNCHER, in_ci, node  # noqa: F401 - fixture
from tests.support.scripts import write_script

ACPX = os.path.join(HERE, "node_modules", ".bin", "acpx")
STEP = 60  # seconds any one acpx command may take


@pytest.fixture
def acpx(node):  # noqa: F811 - the node fixture skips (or fails in CI) without node
    if not os.path.exists(ACPX):
        message = "acpx is not installed: npm install in tests/interop"
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)
    return ACPX


class Acpx:
    def __init__(self, acpx, env, workspace):
        agent = " ".join(shlex.quote(part) for part in
                         (sys.executable, LAUNCHER, "--provider", "scripted"))
        self.base = [acpx, "--ttl", "1", "--agent", agent, "--cwd", workspace]
        self.env = env

    def run(self, *args):
        done = subprocess.run(self.base + list(args), env=self.env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=STEP)
        assert done.returncode == 0, (args, done.returncode, done.stderr[-3000:])
        return done

    def prompt(self, text):
        done = self.run("--approve-all", "--format", "json", "prompt", text)
        return wire(done.stdout)

    def start_prompt(self, text):
        return subprocess.Popen(self.base + ["--approve-all", "--format", "json", "prompt", text],
                                env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def wait_agent_gone(self):
        """Until acpx's queue owner (and so our agent) has ended after its ttl."""
        deadline = STEP * 4
        while True:
            status = self.run("status").stdout
            if "pid: -" in status:
                return
            deadline -= 1
            assert deadline > 0, status
            threading.Event().wait(0.25)


def wire(stdout):
    messages = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    errors = [m for m in messages if "error" in m]
    assert not errors, errors
    return messages


def methods(messages):
    return [m["method"] for m in messages if "method" in m and "id" in m]


def texts(messages):
    return "".join(m["params"]["update"]["content"]["text"] for m in messages
                   if m.get("method") == "session/update"
                   and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")


def stop_reasons(messages):
    return [m["result"]["stopReason"] for m in messages
            if isinstance(m.get("result"), dict) and "stopReason" in m["result"]]


@pytest.mark.timeout(300)
def test_acpx_drives_a_session(acpx, agent_env, workspace, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    made = outside / "made.txt"
    script = write_script(tmp_path, [
        [{"tool_call": {"name": "create_file",
                        "arguments": {"path": str(made), "content": "made by the agent\n"}}}],
        [{"text": "Made it."}],
        [{"text": "Still here."}],
        [{"text": "Working"}, {"hang": True}],
    ])
    home = tmp_path / "acpx-home"
    home.mkdir()
    client = Acpx(acpx, dict(agent_env, HOME=str(home), TERM2ACP_SCRIPT=str(script)), workspace)

    client.run("sessions", "new")

    # a tool call outside the workspace: the agent asks, acpx allows
    turn = client.prompt("Make the file.")
    asked = [m for m in turn if m.get("method") == "session/request_permission"]
    assert len(asked) == 1
    after = turn[turn.index(asked[0]):]  # ids of the two directions overlap: acpx's answer
    answer = next(m for m in after if m.get("id") == asked[0]["id"] and "result" in m)
    chosen = answer["result"]["outcome"]["optionId"]
    offered = {o["optionId"]: o["kind"] for o in asked[0]["params"]["options"]}
    assert offered[chosen].startswith("allow")
    assert made.read_text() == "made by the agent\n"
    assert texts(turn) == "Made it." and stop_reasons(turn) == ["end_turn"]

    # acpx's agent process ends after its ttl; the next prompt reopens the session in a new
    # one (session/resume), history included: the scripted model answers its third turn
    client.wait_agent_gone()
    turn = client.prompt("Are you there?")
    assert methods(turn)[:2] == ["initialize", "session/resume"]
    assert texts(turn) == "Still here." and stop_reasons(turn) == ["end_turn"]

    # a turn cancelled from another acpx process (in a fresh queue owner: one that reached
    # its ttl refuses new work while it closes)
    client.wait_agent_gone()
    running = client.start_prompt("Work until I cancel.")
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in running.stdout] and
                     lines.put(None), daemon=True).start()
    seen = []
    while not texts(seen):  # the turn streams its first chunk, then hangs
        line = lines.get(timeout=STEP)
        assert line is not None, (seen, running.stderr.read()[-3000:])
        if line.startswith("{"):
            seen.append(json.loads(line))
    client.run("cancel")
    running.wait(timeout=STEP)
    while (line := lines.get(timeout=STEP)) is not None:
        if line.startswith("{"):
            seen.append(json.loads(line))
    assert stop_reasons(seen) == ["cancelled"] and running.returncode == 0
    assert not [m for m in seen if "error" in m]
    client.wait_agent_gone()


@pytest.mark.timeout(300)
def test_acpx_approving_a_write_late_at_its_own_prompt(acpx, agent_env, workspace, tmp_path):
    """acpx's default permissions (approve reads, ask for writes) on a terminal (``acpx
    exec``, whose process asks; a queue owner has no terminal and refuses writes): our
    create_file reaches acpx as fs/write_text_file, acpx asks its user "Allow write?", the
    user answers after a while, and the file is written (the agent waits as long as a
    permission waits; a test of the timeout itself is tests/e2e/test_real_clients.py)."""
    import pty
    import select
    import time

    target = os.path.join(workspace, "late.txt")
    script = write_script(tmp_path, [
        [{"tool_call": {"name": "create_file",
                        "arguments": {"path": "late.txt", "content": "approved late\n"}}}],
        [{"text": "Wrote it."}],
    ])
    home = tmp_path / "acpx-home"
    home.mkdir()
    client = Acpx(acpx, dict(agent_env, HOME=str(home), TERM2ACP_SCRIPT=str(script)), workspace)
    leader, follower = pty.openpty()  # acpx exec runs the agent itself: it asks on its tty
    proc = subprocess.Popen(client.base + ["--format", "json", "exec", "Write the file."],
                            env=client.env, stdin=follower, stdout=subprocess.PIPE,
                            stderr=follower, text=True)
    os.close(follower)
    seen, deadline = b"", time.monotonic() + STEP
    try:
        while b"Allow write?" not in seen:
            assert time.monotonic() < deadline, seen[-2000:]
            ready, _, _ = select.select([leader], [], [], 1)
            if ready:
                seen += os.read(leader, 4096)
        assert not os.path.exists(target)
        time.sleep(2)  # the user reads the preview before answering (the late answer)
        os.write(leader, b"y\n")
        out, _ = proc.communicate(timeout=STEP)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(leader)
    assert proc.returncode == 0
    turn = wire(out)
    assert texts(turn) == "Wrote it." and stop_reasons(turn) == ["end_turn"]
    with open(target, encoding="utf-8") as fh:
        assert fh.read() == "approved late\n"
