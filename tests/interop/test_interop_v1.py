"""Interop: the official ACP TypeScript SDK's DEFAULT (v1) client drives bin/term2-acp.

``client_v1.mjs`` (next to this file) runs the whole scenario with ``ClientSideConnection``
from ``@agentclientprotocol/sdk`` (what Zed, JetBrains and the other shipping editors speak)
and Zed's exact ``initialize``, and fails on anything the SDK objects to: a text turn, a
tool turn (editor fs, a permission allowed and one rejected), a turn cancelled
mid-stream, list, close, then ``session/load`` with replay in a second process, list,
close. This test prepares the workspace and the scripted turns, runs it with a bound and
checks the JSON summary it prints. Needs ``node`` and ``npm install`` in tests/interop.
"""

import json
import os
import subprocess
import sys

from tests.interop.test_interop import HERE, LAUNCHER, TIMEOUT, node  # noqa: F401 - fixture
from tests.support.scripts import write_script

CLIENT = os.path.join(HERE, "client_v1.mjs")
PROMPTS = {"text": "Say hello.", "tools": "Use the tools.", "cancel": "Stream until I cancel."}
BUFFER_TEXT = "unsaved buffer of notes.txt\n"  # what client_v1.mjs's editor holds


def run_client(node, env, workspace, outside, timeout=TIMEOUT):  # noqa: F811 - node fixture
    command = [node, CLIENT, "--workspace", workspace, "--outside", outside,
               "--timeout-ms", str((timeout - 20) * 1000),
               "--", sys.executable, LAUNCHER, "--provider", "scripted"]
    try:
        done = subprocess.run(command, env=env, cwd=HERE, stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"client_v1.mjs did not finish within {timeout}s; stderr:\n"
                             f"{(exc.stderr or b'').decode(errors='replace')[-4000:]}") from None
    stdout = done.stdout.decode(errors="replace")
    stderr = done.stderr.decode(errors="replace")
    lines = [line for line in stdout.splitlines() if line.strip()]
    try:
        summary = json.loads(lines[-1])
    except (IndexError, ValueError):
        raise AssertionError(f"client_v1.mjs printed no JSON summary (exit {done.returncode});\n"
                             f"stdout:\n{stdout[-2000:]}\nstderr:\n{stderr[-4000:]}") from None
    assert done.returncode == 0 and summary["ok"], (
        f"client_v1.mjs failed (exit {done.returncode}):\n  - " + "\n  - ".join(summary["failures"])
        + f"\nstderr:\n{stderr[-4000:]}")
    return summary


def test_official_sdk_v1_client_drives_a_full_session(node, agent_env, workspace, tmp_path):  # noqa: F811
    notes = os.path.join(workspace, "notes.txt")
    with open(notes, "w") as fh:
        fh.write("notes saved on disk\n")
    outside_dir = tmp_path / "outside"
    outside_dir.mkdir()
    secret = outside_dir / "secret.txt"
    secret.write_text("text outside the workspace\n")
    refused = outside_dir / "refused.txt"
    made = os.path.join(workspace, "made", "by-agent.txt")
    script = write_script(tmp_path, [
        [{"text": "Hello "}, {"text": "there."}, {"usage": {"input": 20, "output": 2}}],
        [{"thought": "Let me look."}, {"text": "Working."},
         {"tool_call": {"name": "read_file", "arguments": {"path": "notes.txt"}}},
         {"tool_call": {"name": "create_file", "arguments": {"path": "made/by-agent.txt",
                                                             "content": "made\n"}}},
         {"tool_call": {"name": "read_file", "arguments": {"path": str(secret)}}},
         {"tool_call": {"name": "create_file", "arguments": {"path": str(refused),
                                                             "content": "no\n"}}}],
        [{"text": "Tools done."}],
        [{"text": "streaming "}, {"hang": True}],
    ], context_window=64000)
    env = dict(agent_env, TERM2ACP_SCRIPT=str(script))

    summary = run_client(node, env, workspace, str(outside_dir))

    init = summary["initialize"]
    assert init["protocolVersion"] == 1 and init["agentInfo"]["name"] == "term2"
    assert init["agentCapabilities"]["loadSession"] is True
    assert [m["id"] for m in init["authMethods"]] == ["openai", "anthropic", "term2-login"]

    turns = summary["turns"]
    assert turns["text"]["stopReason"] == "end_turn" and turns["text"]["text"] == "Hello there."
    assert turns["tools"]["stopReason"] == "end_turn"
    assert turns["tools"]["text"] == "Working.Tools done."
    assert turns["cancel"]["stopReason"] == "cancelled"
    assert summary["cancelLatencyMs"] is not None and summary["cancelLatencyMs"] < 5000
    for label in turns:
        assert "state_update" not in turns[label]["kinds"]

    calls = list(summary["toolCalls"].values())
    assert [c["firstKind"] for c in calls] == ["tool_call"] * 4
    read_inside, create_inside, read_outside, create_outside = calls
    assert read_inside["statuses"][-1] == "completed" and "unsaved buffer" in read_inside["output"]
    assert create_inside["statuses"][-1] == "completed"
    assert read_outside["statuses"][-1] == "completed" and "text outside" in read_outside["output"]
    assert create_outside["statuses"][-1] == "failed"
    assert "Permission denied" in create_outside["output"]
    assert [p["answered"] for p in summary["permissionRequests"]] == ["allow-once", "reject"]
    assert summary["fsRequests"] == [
        {"method": "fs/read_text_file", "path": notes},
        {"method": "fs/write_text_file", "path": made, "content": "made\n"}]
    assert open(made).read() == "made\n" and not refused.exists()

    assert summary["listed"]["found"] and summary["listed"]["title"] == PROMPTS["text"]
    assert summary["closeResult"] == {}

    load = summary["load"]
    assert load["result"]["modes"]["currentModeId"] == "auto"  # issue 15: the choices
    assert [o["id"] for o in load["result"]["configOptions"]] == ["model", "effort", "mode"]
    assert load["userText"] == [PROMPTS["text"], PROMPTS["tools"], PROMPTS["cancel"]]
    assert load["agentText"].startswith("Hello there.Working.")
    for kind in ("user_message_chunk", "agent_message_chunk", "agent_thought_chunk",
                 "tool_call", "tool_call_update"):
        assert load["kinds"].get(kind), f"no {kind} replayed: {load['kinds']}"
    assert load["kinds"]["tool_call"] == load["kinds"]["tool_call_update"] == 4
    assert summary["relisted"] == [summary["sessionId"]] and summary["reclosed"] == {}
    assert summary["agentExits"] == [{"code": 0, "signal": None}] * 2
