"""Calls of one model round side by side, through the launcher with a model server of the
test's own (tests/support/fake_llm.py) on v1 and v2: two 1.5 s commands take about the
time of one, their results go back in the model's order, and cancel ends both."""

import json
import os
import shutil
import time

import pytest

from tests.support import fake_llm as f

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None and not os.environ.get("CI"),
                                reason="bubblewrap is not installed")

SLEEP = 1.5


def shell_round(*commands):
    """One model answer calling ``shell`` once per command (call ids call_0, call_1, ...)."""
    tools = [f.oa_tool(i, f"call_{i}", "shell", json.dumps({"command": c}))
             for i, c in enumerate(commands)]
    return f.openai_sse(*tools, f.oa_finish("tool_calls"))


def start(acp_agent, acp_workspace, server, protocol):
    agent = acp_agent(args=["--provider", "openai", "--model", "gpt-4.1-mini"],
                      env={"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "x"},
                      protocol=protocol)
    kwargs = {"mcp_servers": []} if protocol == 1 else {}
    return agent, agent.new_session(acp_workspace, **kwargs)


def timed_prompt(agent, sid):
    began = time.monotonic()
    _, updates, _ = agent.prompt(sid, "go", timeout=60)
    return time.monotonic() - began, updates


def statuses(updates):
    return [(u["toolCallId"], u["status"]) for u in updates
            if u["sessionUpdate"] in ("tool_call", "tool_call_update") and "status" in u]


@pytest.mark.parametrize("protocol", [1, 2])
def test_two_commands_of_one_round_take_about_the_time_of_one(acp_agent, acp_workspace,
                                                                server, protocol):
    for _ in range(2):
        server.enqueue(shell_round(f"sleep {SLEEP}; echo one"), f.openai_sse(f.oa_text("ok")),
                       shell_round(f"sleep {SLEEP}; echo first", f"sleep {SLEEP}; echo second"),
                       f.openai_sse(f.oa_text("both")))
    agent, sid = start(acp_agent, acp_workspace, server, protocol)
    singles, doubles = [], []
    for _ in range(2):  # the best of two of each: a load spike in one run does not decide
        singles.append(timed_prompt(agent, sid)[0])
        took, updates = timed_prompt(agent, sid)
        doubles.append(took)
        seen = statuses(updates)
        ids = sorted({call for call, _ in seen})
        assert len(ids) == 2
        first_done = min(seen.index((call, "completed")) for call in ids)
        assert all(seen.index((call, "in_progress")) < first_done for call in ids)  # overlapped
    # one after another takes a whole SLEEP more than the single command
    assert min(doubles) < min(singles) + SLEEP * 0.8, (singles, doubles)
    requests = [r.json for r in server.wait_requests(8)]
    results = [m for m in requests[3]["messages"] if m["role"] == "tool"][-2:]
    assert [m["tool_call_id"] for m in results] == ["call_0", "call_1"]  # the model's order
    assert "first" in results[0]["content"] and "second" in results[1]["content"]
    assert agent.close() == 0


@pytest.mark.parametrize("protocol", [2])
def test_cancel_ends_every_call_of_the_round(acp_agent, acp_workspace, server, protocol):
    markers = [os.path.join(acp_workspace, f"survivor-{i}") for i in range(3)]
    server.enqueue(shell_round(*(f"echo started; sleep 2; touch {m}" for m in markers)))
    agent, sid = start(acp_agent, acp_workspace, server, protocol)
    request_id = agent.prompt_async(sid, "go")
    running = set()

    def all_running(message):
        update = message.get("params", {}).get("update", {})
        if update.get("status") == "in_progress":
            running.add(update["toolCallId"])
        return len(running) == 3
    agent.wait_for(all_running, timeout=30)
    agent.notify("session/cancel", {"sessionId": sid})
    if protocol == 1:
        end = agent.wait_for(lambda m: m.get("id") == request_id and "result" in m, timeout=15)
        assert end["result"]["stopReason"] == "cancelled"
    else:
        assert agent.wait_update(state="idle", timeout=15)["stopReason"] == "cancelled"
    finals = {}
    for message in agent.messages:
        update = message.get("params", {}).get("update", {})
        if update.get("toolCallId") in running and "status" in update:
            finals[update["toolCallId"]] = update["status"]
    assert set(finals.values()) <= {"cancelled", "failed"} and len(finals) == 3
    deadline = time.monotonic() + 2.5  # past the commands' own end: nothing of theirs ran on
    while time.monotonic() < deadline:
        assert not any(os.path.exists(m) for m in markers)
        time.sleep(0.05)
    assert not any(os.path.exists(m) for m in markers)
    assert agent.close() == 0


@pytest.mark.parametrize("protocol", [1, 2])
def test_an_edit_in_a_round_runs_after_the_calls_before_it(acp_agent, acp_workspace, server,
                                                          protocol):
    """A command that writes a file and an edit of that file in one round: the edit waits
    for the command (file changes run alone, in the model's order)."""
    write = f.oa_tool(0, "call_0", "shell", json.dumps(
        {"command": "sleep 0.5 && printf 'hello\\n' > made.txt"}))
    edit = f.oa_tool(1, "call_1", "edit_file", json.dumps(
        {"path": "made.txt", "edits": [{"old_text": "hello", "new_text": "bye"}]}))
    server.enqueue(f.openai_sse(write, edit, f.oa_finish("tool_calls")),
                   f.openai_sse(f.oa_text("done"), f.oa_finish("stop")))
    agent, sid = start(acp_agent, acp_workspace, server, protocol)
    agent.prompt(sid, "make it, then edit it", timeout=60)
    with open(os.path.join(acp_workspace, "made.txt")) as fh:
        assert fh.read() == "bye\n"
    results = [m for m in server.requests[-1].json["messages"] if m["role"] == "tool"]
    assert [r["tool_call_id"] for r in results] == ["call_0", "call_1"]
