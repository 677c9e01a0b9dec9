"""A 2,000-prompt session resumed through the launcher: v2 session/resume with replay and v1
session/load send every update of its journal, in order, and the session goes on.

The client here reads the launcher's lines itself (the kit's client checks each message
against the schema, seconds for 8,000 updates; other tests check their shapes)."""

import json
import os
import select
import subprocess
import time
import uuid

import pytest

from term2acp.acp.v1.replay import forms
from term2acp.sessions.store import Store
from term2acp.testing.harness import V2_INITIALIZE, ZED_V1_INITIALIZE, default_command
from tests.support.clock import within

PROMPTS = 2000


@pytest.fixture(params=["encoded", "translated"])
def stored(request, acp_env, acp_workspace):
    """A session of PROMPTS prompts (a question, a read_file call, an answer each) written
    to the agent's store, as a long session leaves it; a compaction marker at prompt 1,500.
    Its journal records with their updates encoded, as the agent stores them, or without
    (as stored before it did: replay translates them)."""
    store = Store(os.path.join(acp_env["TERM2ACP_HOME"], "sessions.sqlite3"),
                  replay_forms=forms if request.param == "encoded" else None).open()
    session_id = str(uuid.uuid4())
    store.create_session(session_id, acp_workspace, "scripted", "script")
    for i in range(PROMPTS):
        if i == 1500:
            store.append_history(session_id, {"role": "compaction", "summary": "earlier work"})
        store.append_history(session_id, {"role": "user", "content": f"question {i}"})
        store.append_history(session_id, {"role": "assistant", "content": f"answer {i}",
                                          "cost": 0.001})
        store.journal_put(session_id, "user_message", f"u{i}", {
            "message_id": f"u{i}", "content": [{"type": "text", "text": f"question {i}"}]})
        store.journal_put(session_id, "tool_call", f"c{i}", {
            "call_id": f"c{i}", "title": f"Read notes {i}", "kind": "read",
            "status": "completed", "content": [{"type": "text", "text": "hello"}]})
        store.journal_put(session_id, "agent_message", f"a{i}",
                          {"message_id": f"a{i}", "text": f"answer {i}"})
        if i % 500 == 499:
            store.commit()
    store.commit()
    store.close()
    return session_id


class Client:
    """The launcher over pipes: requests, and the lines before each answer."""

    def __init__(self, env, initialize):
        self.proc = subprocess.Popen(default_command(), env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.buf, self.next_id = b"", 0
        assert "result" in self.request("initialize", initialize)[0]

    def request(self, method, params, timeout=within(60)):
        self.next_id += 1
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.next_id,
                                          "method": method, "params": params}).encode() + b"\n")
        self.proc.stdin.flush()
        before, deadline = [], time.monotonic() + timeout
        while True:
            while b"\n" not in self.buf:
                assert select.select([self.proc.stdout], [], [],
                                     max(0, deadline - time.monotonic()))[0], "no answer"
                chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
                assert chunk, "the agent closed its output"
                self.buf += chunk
            line, self.buf = self.buf.split(b"\n", 1)
            message = json.loads(line)
            if message.get("id") == self.next_id and "method" not in message:
                return message, before
            before.append(message)

    def close(self):
        self.proc.stdin.close()
        assert self.proc.wait(within(15)) == 0


def replayed(env, initialize, method, params):
    """The session/update messages ``method`` sent before its answer, in order."""
    client = Client(env, initialize)
    try:
        response, before = client.request(method, params)
        assert "result" in response, response
        return [m["params"]["update"] for m in before if m.get("method") == "session/update"
                and m["params"]["update"]["sessionUpdate"] not in ("available_commands_update",
                                                                   "config_option_update")]
    finally:
        client.close()


def order(updates):
    keys = []
    for u in updates:
        content = u.get("content")
        if u["sessionUpdate"] in ("tool_call", "tool_call_update"):
            keys.append(u["toolCallId"])
        else:  # v1: one chunk; v2: the whole message's blocks
            keys.append((content if isinstance(content, dict) else content[0])["text"])
    return keys


EXPECTED = [key for i in range(PROMPTS) for key in (f"question {i}", f"c{i}", f"answer {i}")]


def test_v2_resume_replays_a_2000_prompt_session_in_order(acp_env, acp_workspace, stored):
    updates = replayed(acp_env, V2_INITIALIZE, "session/resume", {
        "sessionId": stored, "cwd": acp_workspace, "replayFrom": {"type": "start"}})
    assert len(updates) == 3 * PROMPTS
    assert order(updates) == EXPECTED
    assert all(u["status"] == "completed" for u in updates
               if u["sessionUpdate"] == "tool_call_update")


def test_v1_load_replays_a_2000_prompt_session_in_order(acp_env, acp_workspace, stored):
    updates = replayed(acp_env, ZED_V1_INITIALIZE, "session/load", {
        "sessionId": stored, "cwd": acp_workspace, "mcpServers": []})
    assert len(updates) == 4 * PROMPTS  # v1: each call as tool_call, then its update
    keys = order(updates)
    assert [k for n, k in enumerate(keys) if n == 0 or k != keys[n - 1]] == EXPECTED


def test_a_resumed_long_session_goes_on(acp_agent, acp_workspace, stored):
    agent = acp_agent(turns=[], default_turn=[{"text": "ok"}])
    response = agent.request("session/resume", {"sessionId": stored, "cwd": acp_workspace})
    assert "result" in response, response
    _, _, idle = agent.prompt(stored, "one more", timeout=within(30))
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    agent.close()
