"""Interop: the official ACP TypeScript SDK's experimental v2 client drives bin/term2-acp.

``client.mjs`` (next to this file) runs the whole scenario with
``@agentclientprotocol/sdk/experimental/v2`` and fails on anything the SDK objects to;
this test prepares the workspace and the scripted turns, runs it with a bound and checks
the JSON summary it prints. Needs ``node`` and ``npm install`` in tests/interop (done by
.ci/run); outside CI the test is skipped when either is missing, in CI it fails.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.support.scripts import write_script

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CLIENT = os.path.join(HERE, "client.mjs")
NODE_MODULES = os.path.join(HERE, "node_modules", "@agentclientprotocol", "sdk")
LAUNCHER = os.path.join(ROOT, "bin", "term2-acp")

FIRST_PROMPT = "Read the notes, then the file outside the workspace."  # as in client.mjs
TIMEOUT = 100  # below the pytest-timeout of 120 s (setup.cfg), so we fail with context


def in_ci():
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture
def node():
    path = shutil.which("node")
    missing = []
    if path is None:
        missing.append("`node` is not on PATH")
    if not os.path.isdir(NODE_MODULES):
        missing.append("tests/interop/node_modules is missing "
                       "(run `npm --prefix tests/interop install`)")
    if missing:
        if in_ci():
            pytest.fail("interop prerequisites missing in CI: " + "; ".join(missing)
                        + " (.ci/run must install them)")
        pytest.skip("; ".join(missing))
    return path


def run_client(node, env, workspace, timeout=TIMEOUT):
    command = [node, CLIENT, "--workspace", workspace, "--timeout-ms", str((timeout - 20) * 1000),
               "--", sys.executable, LAUNCHER, "--provider", "scripted"]
    try:
        done = subprocess.run(command, env=env, cwd=HERE, stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"client.mjs did not finish within {timeout}s; stderr:\n"
                    f"{(exc.stderr or b'').decode(errors='replace')[-4000:]}")
    stdout = done.stdout.decode(errors="replace")
    stderr = done.stderr.decode(errors="replace")
    lines = [line for line in stdout.splitlines() if line.strip()]
    try:
        summary = json.loads(lines[-1])
    except (IndexError, ValueError):
        pytest.fail(f"client.mjs printed no JSON summary (exit {done.returncode});\n"
                    f"stdout:\n{stdout[-2000:]}\nstderr:\n{stderr[-4000:]}")
    assert done.returncode == 0 and summary["ok"], (
        f"client.mjs failed (exit {done.returncode}):\n  - " + "\n  - ".join(summary["failures"])
        + f"\nstderr:\n{stderr[-4000:]}")
    return summary


def test_official_sdk_v2_client_drives_a_full_session(node, agent_env, workspace, tmp_path):
    with open(os.path.join(workspace, "notes.txt"), "w") as fh:
        fh.write("notes inside the workspace\n")
    outside_dir = tmp_path / "outside"
    outside_dir.mkdir()
    outside = outside_dir / "secret.txt"
    outside.write_text("text outside the workspace\n")
    script = write_script(tmp_path, [
        [{"thought": "Let me look."}, {"text": "Reading "}, {"text": "files."},
         {"usage": {"input": 50, "output": 5, "cost": 0.001}},
         {"tool_call": {"name": "read_file", "arguments": {"path": "notes.txt"}}},
         {"tool_call": {"name": "read_file", "arguments": {"path": str(outside)}}},
         {"tool_call": {"name": "no_such_tool", "arguments": {}}}],
        [{"text": "All done."}],
        [{"text": "Second "}, {"text": "answer."}],
    ], context_window=64000)
    env = dict(agent_env, TERM2ACP_SCRIPT=str(script))

    summary = run_client(node, env, workspace)

    assert summary["protocolVersion"] == 2 and summary["agentInfo"]["name"]
    assert summary["promptResponses"] == [{}, {}]
    assert summary["stopReasons"] == ["end_turn"]
    updates = summary["updates"]
    for kind in ("state:running", "user_message", "agent_thought_chunk", "agent_message_chunk",
                 "usage_update", "tool_call_update", "state:requires_action"):
        assert updates.get(kind), f"no {kind} update in {updates}"
    assert summary["firstTurnText"] == "Reading files.All done."
    assert summary["secondTurnText"] == "Second answer."

    inside, outside_call, missing = summary["toolCalls"].values()
    assert inside["name"] == "read_file" and inside["statuses"][-1] == "completed"
    assert "notes inside the workspace" in inside["output"]
    assert outside_call["statuses"][-1] == "completed" and "in_progress" in outside_call["statuses"]
    assert "text outside the workspace" in outside_call["output"]
    assert missing["statuses"][-1] == "failed" and "no_such_tool" in missing["output"]
    assert summary["toolCallStatuses"]["completed"] == 2
    assert summary["toolCallStatuses"]["failed"] == 1

    # exactly one approval: the read outside the workspace, answered "allow once"
    (permission,) = summary["permissionRequests"]
    assert permission["subjectType"] == "tool_call"
    assert permission["toolCallId"] == list(summary["toolCalls"])[1]
    assert permission["answered"] == "allow-once"
    assert "allow-once:allow_once" in permission["options"]

    assert summary["listed"]["found"] and summary["listed"]["cwd"] == workspace
    assert summary["listed"]["title"] == FIRST_PROMPT

    replayed = summary["replayedMessages"]
    assert [m["text"] for m in replayed if m["kind"] == "user_message"] == [FIRST_PROMPT, "And now?"]
    agent_texts = [m["text"] for m in replayed if m["kind"] == "agent_message"]
    assert "".join(agent_texts) == "Reading files.All done.Second answer."
    assert {"kind": "agent_thought", "text": "Let me look."} in replayed
    assert summary["replayed"].get("tool_call_update", 0) >= 3
    assert summary["replayBeforeResponse"] == sum(summary["replayed"].values())

    assert summary["closeResult"] == {}
    assert summary["agentExit"] == {"code": 0, "signal": None}
    assert summary["wire"]["byKind"].get("request:session/request_permission") == 1
