"""What real clients showed, each with a client that behaves as that client does, against
the fake model server: acpx approves an edit at its own write prompt late (the write waits
as long as a permission does); CodeCompanion keeps one option per kind (every start choice
of the plan question is still reachable, and the plan is in the request); Toad's first
window prompts after a take-over (a readable answer, once; not a warning in the log);
agent-shell joins thought chunks (the AGENTS.md notice ends as its own block); background
process calls name their command, and shell_kill lets the process end on SIGTERM."""

import json
import os

import gevent
import pytest

from term2acp.acp.v1 import files
from term2acp.testing.harness import ANSWERED
from tests.e2e.test_plan_mode import plan_session
from tests.e2e.test_undo import BWRAP, calls, read, srv, text, write  # noqa: F401 - srv
from tests.support import fake_llm as f


def openai(acp_agent, server, protocol=2, **kw):
    return acp_agent(args=("--provider", "openai", "--model", "m"), protocol=protocol,
                     env={"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "sk-t-123456"},
                     **kw)


# ---------------------------------------------------------------- acpx: a late write
def test_acpx_an_edit_approved_late_at_the_editors_write_prompt_lands(acp_agent, acp_workspace,
                                                                       srv, monkeypatch):
    """acpx asks its user before it answers fs/write_text_file: the write waits as a
    permission does (here past the read timeout, scaled down from the 30 s that lost it)."""
    monkeypatch.setattr(files, "TIMEOUT", 0.2)
    srv.enqueue(calls(("create_file", {"path": "late.txt", "content": "approved\n"})),
                text("written"))
    agent = openai(acp_agent, srv, protocol=1, process=False)
    sid = agent.new_session(acp_workspace)

    def on_request(message):
        if message["method"] != "fs/write_text_file":
            return None
        def approve_late():
            gevent.sleep(0.6)  # the user reads the diff in acpx, then says yes
            params = message["params"]
            write(params["path"], params["content"])
            agent.send({"jsonrpc": "2.0", "id": message["id"], "result": {}})
        gevent.spawn(approve_late)
        return ANSWERED
    _, updates, end = agent.prompt(sid, "write it", on_request=on_request)
    assert end["result"]["stopReason"] == "end_turn"
    statuses = [u.get("status") for u in updates if u["sessionUpdate"] == "tool_call_update"]
    assert statuses[-1] == "completed", updates
    assert read(os.path.join(acp_workspace, "late.txt")) == "approved\n"
    agent.close()


# ---------------------------------------------------------------- CodeCompanion: kinds
@pytest.mark.parametrize("start, mode", [("plan-start-auto", "auto"), ("plan-start-ask", "ask"),
                                         ("plan-keep", "plan")])
def test_codecompanion_reaches_every_start_choice_and_sees_the_plan(acp_agent, acp_workspace,
                                                                    srv, start, mode):
    srv.enqueue(calls(("finish_plan", {"summary": "1. PLAN-STEP-ONE"})), text("ok"), text("ok"))
    agent, sid = plan_session(acp_agent, srv, acp_workspace, 1)
    shown = []

    def codecompanion(message):
        if message["method"] != "session/request_permission":
            return None
        params = message["params"]
        by_kind = {o["kind"]: o for o in params["options"]}  # one option per kind, last wins
        shown.append(params["toolCall"])
        wanted = next(o for o in params["options"] if o["optionId"] == start)
        return {"outcome": {"outcome": "selected",
                            "optionId": by_kind[wanted["kind"]]["optionId"]}}
    _, updates, _ = agent.prompt(sid, "plan it", on_request=codecompanion)
    assert "PLAN-STEP-ONE" in json.dumps(shown[0].get("content"))
    modes = ["plan"] + [u["currentModeId"] for u in updates
                        if u["sessionUpdate"] == "current_mode_update"]
    assert modes[-1] == mode, modes
    agent.close()


# ---------------------------------------------------------------- Toad: after a take-over
@pytest.mark.acp_process
def test_toad_the_first_windows_prompt_after_a_take_over_reads_well(acp_agent, acp_workspace,
                                                                    srv):
    first = openai(acp_agent, srv, process=True)
    second = openai(acp_agent, srv, process=True)
    sid = first.new_session(acp_workspace)
    taken = second.request("session/resume", {"sessionId": sid, "cwd": acp_workspace})
    assert "result" in taken, taken
    response, updates, idle = first.prompt(sid, "still there?")
    assert response["result"] == {} and idle["params"]["update"]["stopReason"] == "end_turn"
    words = "".join(u["content"]["text"] for u in updates
                    if u["sessionUpdate"] == "agent_message_chunk")
    assert f"pid {second.proc.pid}" in words and "load or resume it here again" in words
    again = first.request("session/prompt", {"sessionId": sid,
                                             "prompt": [{"type": "text", "text": "x"}]})
    assert again["error"]["code"] == -32009  # once: then the error says it
    first.close()
    assert "WARNING" not in first.stderr and "taken over" not in first.stderr
    second.close()


# ---------------------------------------------------------------- agent-shell: blocks
def test_agent_shell_the_agents_md_notice_is_its_own_block(acp_agent, acp_workspace, srv):
    write(os.path.join(acp_workspace, "AGENTS.md"), "Be brief.\n")
    srv.enqueue(f.openai_sse(f.oa_reasoning("MODEL-THOUGHT"), f.oa_text("ok"),
                             f.oa_finish("stop")))
    agent = openai(acp_agent, srv)
    sid = agent.new_session(acp_workspace)
    _, updates, _ = agent.prompt(sid, "hi")
    joined = "".join(u["content"]["text"] for u in updates
                     if u["sessionUpdate"] == "agent_thought_chunk")  # as agent-shell shows it
    assert "AGENTS.md" in joined and joined.endswith("\n\nMODEL-THOUGHT"), repr(joined)
    agent.close()


# ---------------------------------------------------------------- background processes
@pytest.mark.skipif(not BWRAP, reason="bubblewrap is not installed")
def test_background_calls_name_their_command_and_kill_sends_term_first(acp_agent, acp_workspace,
                                                                        srv):
    script = "trap 'echo got-term; exit 0' TERM; echo ready; while :; do sleep 0.05; done"
    srv.enqueue(calls(("shell", {"command": script, "background": True, "wait_seconds": 5})),
                calls(("shell_output", {"process_id": "p1"})),
                calls(("shell_kill", {"process_id": "p1"})), text("done"))
    agent = openai(acp_agent, srv)
    sid = agent.new_session(acp_workspace)
    _, updates, _ = agent.prompt(sid, "run it", timeout=60)
    titles = [u.get("title") for u in updates if u.get("title")]
    assert any(t.startswith("Output of p1 (trap ") for t in titles), titles
    assert any(t.startswith("Kill p1 (trap ") for t in titles), titles
    killed = [m for m in srv.requests[-1].json["messages"] if m["role"] == "tool"][-1]["content"]
    assert "got-term" in killed and "exited with code 0" in killed, killed
    agent.close()
