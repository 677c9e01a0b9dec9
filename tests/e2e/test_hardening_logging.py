"""Issue 23, medium 5 and 6: secrets with a stray CR/LF, and a stderr nobody reads."""

import json
import queue
import subprocess
import sys
import threading
import time

import pytest

from term2acp.testing.harness import REPO_LAUNCHER
from tests.support import fake_llm as f


@pytest.mark.parametrize("key", ["sk-secret-abcdef123456\r", "sk-secret-abcdef123456\r\n",
                                 " sk-secret-abcdef123456\n"])
@pytest.mark.acp_process  # the secret is looked for in a process's whole stderr
def test_an_api_key_pasted_with_its_line_break_is_stripped(spawn, workspace, server, key):
    server.enqueue(f.openai_sse(f.oa_text("hello"), f.oa_finish("stop"), f.oa_usage(3, 1)))
    agent = spawn("--provider", "openai", "--model", "gpt-4.1-mini",
                  env={"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": key})
    agent.initialize()
    sid = agent.new_session(workspace)
    _, updates, idle = agent.prompt(sid, "hi", timeout=30)
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    assert server.wait_requests(1)[0].headers["authorization"] == "Bearer sk-secret-abcdef123456"
    agent.close()
    assert "Traceback" not in agent.stderr


@pytest.mark.acp_process  # the secret is looked for in a process's whole stderr
def test_an_api_key_broken_inside_is_a_clear_error_that_never_shows_it(spawn, workspace,
                                                                       server):
    agent = spawn("--provider", "openai", "--model", "gpt-4.1-mini",
                  env={"OPENAI_BASE_URL": server.openai_url,
                       "OPENAI_API_KEY": "sk-secret-abcdef\r123456"})
    agent.initialize()
    sid = agent.new_session(workspace)
    response = agent.request("session/prompt", {"sessionId": sid, "prompt": [
        {"type": "text", "text": "hi"}]}, timeout=30)
    assert response["error"]["code"] == -32000  # sign-in needed: the key must be set again
    assert "OPENAI_API_KEY contains a line break" in response["error"]["message"]
    agent.close()
    everything = "".join(line.decode() for line in agent.lines) + agent.stderr
    assert "abcdef" not in everything and "123456" not in everything
    assert "Traceback" not in agent.stderr


class Unread:
    """The launcher with a stderr pipe nobody reads; stdout read by a thread."""

    def __init__(self, env):
        self.proc = subprocess.Popen([sys.executable, REPO_LAUNCHER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.lines = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))

    def answer(self, request_id, timeout=20):
        deadline = time.monotonic() + timeout
        while True:
            message = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            if message.get("id") == request_id:
                return message


def test_a_stderr_nobody_reads_never_blocks_the_agent(agent_env):
    env = dict(agent_env, TERM2ACP_LOG_LEVEL="DEBUG")  # the wire log: ~2 lines per message
    agent = Unread(env)
    try:
        padding = "x" * 900
        notes = "".join(json.dumps({"jsonrpc": "2.0", "method": "_noise/note",
                                    "params": {"pad": padding}}) + "\n" for _ in range(2000))
        agent.proc.stdin.write(notes.encode())  # ~2 MB of log lines, the pipe holds 64 KiB
        agent.proc.stdin.write((json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                            "params": {"protocolVersion": 2, "info": {
                                                "name": "t", "version": "1"}}}) + "\n").encode())
        agent.proc.stdin.flush()
        answer = agent.answer(1)
        assert "result" in answer or "error" in answer
        log = []  # now the editor reads stderr: the backlog, then the count of drops
        reader = threading.Thread(target=lambda: log.append(agent.proc.stderr.read()))
        reader.start()
        agent.proc.stdin.close()  # EOF: the agent exits
        assert agent.proc.wait(timeout=20) == 0
        reader.join(timeout=10)
        assert b"log lines were dropped: stderr was not being read" in log[0]
    finally:
        if agent.proc.poll() is None:
            agent.proc.kill()
            agent.proc.wait()
