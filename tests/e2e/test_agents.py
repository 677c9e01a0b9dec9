"""Sub-agents (the ``agent`` tool) through the launcher against a fake model server on
loopback, v1 and v2: children side by side, their answers as the parent's results, the
request prefix they share with the parent, their calls shown as the parent's (``_meta``
naming the agent call), their questions, kinds and failures."""

import json
import os
import shutil
import time

import pytest

from tests.support import agents as a
from tests.support import fake_llm as f
from tests.support.clock import within
from term2acp.testing.harness import selected

PROTOCOLS = pytest.mark.parametrize("protocol", [1, 2])
CONFIG = '[providers.openai]\napi = "chat"\nprompt_cache_key = true\n'


def start(acp_agent, acp_env, workspace, server, protocol, config=CONFIG):
    with open(acp_env["TERM2ACP_CONFIG"], "w") as fh:
        fh.write(config)
    agent = acp_agent(args=["--provider", "openai", "--model", "gpt-4.1-mini"],
                      env={"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "x"},
                      protocol=protocol)
    return agent, agent.new_session(workspace, **({"mcp_servers": []} if protocol == 1 else {}))


def answering(asked):
    """``answer_with(choice)``: answers every permission request with ``choice``, noting
    its params in ``asked``."""
    def answer_with(choice):
        def answer(message):
            if message["method"] == "session/request_permission":
                asked.append(message["params"])
                return selected(choice)
            return None
        return answer
    return answer_with


def ids_named(updates, name):
    return list(dict.fromkeys(u["toolCallId"] for u in a.tool_updates(updates)
                              if u.get("name") == name))


def final(updates, call_id):
    return [u for u in a.tool_updates(updates) if u["toolCallId"] == call_id
            and u.get("status") in ("completed", "failed", "cancelled")][-1]


def text_of(update):
    return "\n".join(c["content"]["text"] for c in update.get("content") or ()
                     if c.get("type") == "content" and c["content"].get("type") == "text")


@PROTOCOLS
def test_two_children_run_side_by_side_and_answer_the_parent(acp_agent, acp_env, acp_workspace,
                                                             server, protocol):
    with open(os.path.join(acp_workspace, "notes.txt"), "w") as fh:
        fh.write("alpha\n")
    router = a.Router({
        None: [a.calls(a.agent_call(0, "call_a", "ALPHA read notes.txt"),
                       a.agent_call(1, "call_b", "BETA list the files")),
               a.says("both done")],
        "ALPHA": [a.calls(a.tool("read_file", "ca_1", path="notes.txt")), a.says("ANSWER-A")],
        "BETA": [a.calls(a.tool("list_directory", "cb_1", path=".")), a.says("ANSWER-B")],
    }, together=("ALPHA", "BETA"))
    server.responder = router
    agent, sid = start(acp_agent, acp_env, acp_workspace, server, protocol)
    _, updates, end = agent.prompt(sid, "survey", timeout=60)
    assert router.met == {"ALPHA": True, "BETA": True}  # both children's requests in flight
    parent_last = [body for who, step, body in router.seen if who is None][-1]
    results = {m["tool_call_id"]: m["content"] for m in parent_last["messages"]
               if m["role"] == "tool"}
    assert results == {"call_a": "ANSWER-A", "call_b": "ANSWER-B"}
    # a general child's first request starts with the parent's bytes
    parent_first = router.first(None)
    for word in ("ALPHA", "BETA"):
        child = router.first(word)
        system = [m for m in child["messages"] if m["role"] == "system"]
        assert system == [m for m in parent_first["messages"] if m["role"] == "system"]
        assert child["tools"] == parent_first["tools"]
        assert child["prompt_cache_key"] == parent_first["prompt_cache_key"] == sid
    # the children's calls are the parent's, each update naming its agent call
    calls = ids_named(updates, "agent")
    assert len(calls) == 2
    for call, child_tool in zip(calls, ("read_file", "list_directory")):
        linked = a.child_updates(updates, call)
        assert {u.get("name") for u in linked if u.get("name")} == {child_tool}
        assert all(u["status"] == "completed" for u in linked if u.get("status") in
                   ("completed", "failed"))
        for update in a.tool_updates(updates):
            if update["toolCallId"] in {u["toolCallId"] for u in linked}:
                assert update["_meta"]["term2"]["parentToolCallId"] == call
    answers = {text_of(final(updates, call)).splitlines()[-1] for call in calls}
    assert answers == {"ANSWER-A", "ANSWER-B"}
    assert "✓" in text_of(final(updates, calls[0]))  # its steps, then its answer
    assert agent.close() == 0


@PROTOCOLS
def test_an_explore_child_is_offered_nothing_that_writes_or_runs(acp_agent, acp_env,
                                                                acp_workspace, server,
                                                                protocol):
    router = a.Router({
        None: [a.calls(a.agent_call(0, "call_e", "GAMMA where is main", kind="explore")),
               a.says("ok")],
        "GAMMA": [a.calls(a.tool("create_file", "cg_1", path="made.txt", content="x")),
                  a.calls(a.tool("shell", "cg_2", command="touch ran.txt")),
                  a.says("nothing written")],
    })
    server.responder = router
    agent, sid = start(acp_agent, acp_env, acp_workspace, server, protocol)
    _, updates, _ = agent.prompt(sid, "explore", timeout=60)
    offered = {t["function"]["name"] for t in router.first("GAMMA")["tools"]}
    assert offered == {"read_file", "list_directory", "glob", "grep", "web_fetch"}
    assert not os.path.exists(os.path.join(acp_workspace, "made.txt"))
    assert not os.path.exists(os.path.join(acp_workspace, "ran.txt"))
    child = [b for w, s, b in router.seen if w == "GAMMA"]
    results = [m for m in child[-1]["messages"] if m["role"] == "tool"]
    assert ["Unknown tool" in m["content"] for m in results] == [True, True]
    call = ids_named(updates, "agent")[0]
    assert final(updates, call)["status"] == "completed"
    assert agent.close() == 0


@PROTOCOLS
def test_a_childs_question_reaches_the_client_and_a_reject_fails_that_call(
        acp_agent, acp_env, acp_workspace, server, protocol, tmp_path):
    outside = str(tmp_path / "outside.txt")
    router = a.Router({
        None: [a.calls(a.agent_call(0, "call_q", "DELTA write outside")), a.says("ok")],
        "DELTA": [a.calls(a.tool("create_file", "cd_1", path=outside, content="x")),
                  a.calls(a.agent_call(0, "cd_2", "EPSILON nested")),
                  a.says("refused twice")],
    })
    server.responder = router
    agent, sid = start(acp_agent, acp_env, acp_workspace, server, protocol)
    asked = []

    def answer(message):
        if message["method"] == "session/request_permission":
            asked.append(message["params"])
            return selected("reject")
        return None
    _, updates, _ = agent.prompt(sid, "go", timeout=60, on_request=answer)
    call = ids_named(updates, "agent")[0]
    assert len(asked) == 1
    assert asked[0]["_meta"]["term2"]["parentToolCallId"] == call
    tool_call = asked[0]["toolCall"] if protocol == 1 else asked[0]["subject"]["toolCall"]
    assert tool_call["_meta"]["term2"]["parentToolCallId"] == call
    assert not os.path.exists(outside)
    results = [m for m in router.seen[-2][2]["messages"] if m["role"] == "tool"]
    assert "did not allow" in results[0]["content"]
    assert "cannot start another sub-agent" in results[1]["content"]  # depth 1
    assert not [w for w, _, _ in router.seen if w == "EPSILON"]
    linked = a.child_updates(updates, call)
    assert {u["toolCallId"] for u in linked if u.get("status") == "failed"} == {
        u["toolCallId"] for u in linked}
    assert agent.close() == 0


@PROTOCOLS
def test_a_childs_provider_error_or_refusal_fails_its_call_with_the_reason(acp_agent, acp_env,
                                                               acp_workspace, server, protocol):
    router = a.Router({
        None: [a.calls(a.agent_call(0, "call_x", "ZETA fail"),
                       a.agent_call(1, "call_y", "PSI refuse")), a.says("it failed")],
        "ZETA": [lambda: f.Status(400, {"error": {"message": "the model is on fire",
                                                  "type": "invalid_request_error"}})],
        "PSI": [lambda: f.openai_sse(f.oa_finish("content_filter"))],
    })
    server.responder = router
    agent, sid = start(acp_agent, acp_env, acp_workspace, server, protocol)
    _, updates, end = agent.prompt(sid, "go", timeout=60)
    call, refused = ids_named(updates, "agent")
    failed = final(updates, call)
    assert failed["status"] == "failed" and "the model is on fire" in text_of(failed)
    assert final(updates, refused)["status"] == "failed"
    results = [m for m in router.seen[-1][2]["messages"] if m["role"] == "tool"]
    assert "sub-agent failed" in results[0]["content"] and "on fire" in results[0]["content"]
    assert "refused" in results[1]["content"]
    assert (end["result"] if protocol == 1 else end["params"]["update"])["stopReason"] \
        == "end_turn"
    assert agent.close() == 0


@PROTOCOLS
def test_usage_and_cost_include_the_children(acp_agent, acp_env, acp_workspace, server,
                                            protocol):
    router = a.Router({
        None: [lambda: f.openai_sse(a.agent_call(0, "call_u", "ETA count"),
                                    f.oa_finish("tool_calls"), f.oa_usage(1000, 100)),
               a.says("done", f.oa_usage(2000, 10))],
        "ETA": [a.says("counted", f.oa_usage(300_000, 50_000))],
    })
    server.responder = router
    agent, sid = start(acp_agent, acp_env, acp_workspace, server, protocol)
    _, updates, end = agent.prompt(sid, "go", timeout=60)
    usage = (end["result"] if protocol == 1 else end["params"]["update"])["usage"]
    assert usage["inputTokens"] == 303_000 and usage["outputTokens"] == 50_110
    meters = [u for u in updates if u["sessionUpdate"] == "usage_update"]
    # gpt-4.1-mini: 0.40 / 1.60 USD per million input / output tokens
    expected = (303_000 * 0.40 + 50_110 * 1.6) / 1e6
    assert abs(meters[-1]["cost"]["amount"] - expected) < 1e-6
    assert [m["used"] for m in meters] == [1100, 1100, 2010]  # the parent's context figures
    assert agent.close() == 0


CLAUDE_AGENT = """---
name: reviewer
description: Reviews code DESCRIPTION-MARK
tools: Read, Grep
model: inherit
---
You review code. {mark}
"""


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text)


def everything_sent(server):
    return "\n".join(r.body.decode() for r in server.requests)


@PROTOCOLS
def test_a_project_agent_file_is_used_only_once_trusted(acp_agent, acp_env, acp_workspace,
                                                       server, protocol):
    """A .claude/agents file unchanged: one trust question, remembered for a new session;
    a changed file asks again and, refused, never reaches the model. The user's own agent
    file (beside config.toml) never asks."""
    path = os.path.join(acp_workspace, ".claude", "agents", "reviewer.md")
    write(path, CLAUDE_AGENT.format(mark="INSTR-ONE"))
    write(os.path.join(os.path.dirname(acp_env["TERM2ACP_CONFIG"]), "agents", "mine.md"),
          "---\ndescription: my own helper\ntools: [read_file]\n---\nMINE-INSTR\n")

    def script(kind, word):
        return {None: [a.calls(a.agent_call(0, "call_r", f"{word} review", kind=kind)),
                       a.says("ok")], word: [a.says(f"{word} reviewed")]}
    asked = []
    answer_with = answering(asked)

    server.responder = router = a.Router(script("reviewer", "ONE"))
    agent, sid = start(acp_agent, acp_env, acp_workspace, server, protocol)
    assert "DESCRIPTION-MARK" not in everything_sent(server)
    agent.prompt(sid, "review", timeout=60, on_request=answer_with("trust-always"))
    assert len(asked) == 1 and "INSTR-ONE" in str(asked[0])  # the body is shown
    child = router.first("ONE")
    assert "INSTR-ONE" in a.texts(child)[-1]
    assert {t["function"]["name"] for t in child["tools"]} == {"read_file", "grep"}
    # a new session (in a new agent process) does not ask again
    agent.close()
    server.responder = router = a.Router(script("reviewer", "TWO"))
    agent, sid = start(acp_agent, acp_env, acp_workspace, server, protocol)
    agent.prompt(sid, "review", timeout=60, on_request=answer_with("trust-always"))
    assert len(asked) == 1 and "INSTR-ONE" in a.texts(router.first("TWO"))[-1]
    # the user's own file: no question
    server.responder = router = a.Router(script("mine", "MY"))
    agent.prompt(sid, "mine", timeout=60, on_request=answer_with("reject"))
    assert len(asked) == 1 and "MINE-INSTR" in a.texts(router.first("MY"))[-1]
    # changed: asked again; refused, nothing of it reaches the model
    write(path, CLAUDE_AGENT.format(mark="INSTR-TWO"))
    server.responder = router = a.Router(script("reviewer", "THREE"))
    _, updates, _ = agent.prompt(sid, "review", timeout=60, on_request=answer_with("reject"))
    assert len(asked) == 2 and "INSTR-TWO" in str(asked[1])
    assert not [w for w, _, _ in router.seen if w == "THREE"]
    assert "INSTR-TWO" not in everything_sent(server)
    result = [m for m in router.seen[-1][2]["messages"] if m["role"] == "tool"][-1]
    assert "is not trusted" in result["content"]
    assert agent.close() == 0


def restart_and_replay(acp_agent, acp_env, workspace, server, protocol, sid):
    agent, _ = start(acp_agent, acp_env, workspace, server, protocol)
    method, params = ("session/load", {"mcpServers": []}) if protocol == 1 else \
        ("session/resume", {"replayFrom": {"type": "start"}})
    begin = len(agent.messages)
    assert "result" in agent.request(method, dict(params, sessionId=sid, cwd=workspace))
    return agent, [m["params"]["update"] for m in agent.messages[begin:]
                   if m.get("method") == "session/update"]


@PROTOCOLS
def test_undo_and_replay_cover_what_a_child_did(acp_agent, acp_env, acp_workspace, server,
                                               protocol):
    """/undo of the turn removes a file a child created; after a restart, the replay shows
    the agent call with its child's calls linked to it."""
    server.responder = a.Router({
        None: [a.calls(a.agent_call(0, "call_m", "THETA make a file")), a.says("made")],
        "THETA": [a.calls(a.tool("create_file", "ct_1", path="child/made.txt",
                                 content="fresh\n")), a.says("THETA made it")],
    })
    agent, sid = start(acp_agent, acp_env, acp_workspace, server, protocol)
    _, updates, _ = agent.prompt(sid, "make", timeout=60)
    made = os.path.join(acp_workspace, "child", "made.txt")
    assert os.path.exists(made)
    call = ids_named(updates, "agent")[0]
    child_call = ids_named(updates, "create_file")[0]
    agent.close()
    agent, replayed = restart_and_replay(acp_agent, acp_env, acp_workspace, server, protocol,
                                         sid)
    assert ids_named(replayed, "agent") == [call]
    linked = a.child_updates(replayed, call)
    assert {u["toolCallId"] for u in linked} == {child_call}
    assert all(u["_meta"]["term2"]["parentToolCallId"] == call for u in a.tool_updates(replayed)
               if u["toolCallId"] == child_call)
    assert "THETA made it" in text_of(final(replayed, call))
    _, updates, _ = agent.prompt(sid, "/undo", timeout=30)
    assert not os.path.exists(made)
    assert agent.close() == 0


def in_proc(token):
    """Processes whose command line holds ``token``."""
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if token.encode() in fh.read():
                    found.append(pid)
        except OSError:
            continue
    return found


def alive(pid):
    """A process that still runs (a zombie waiting for its parent to reap it does not)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            return "\nState:\tZ" not in fh.read()
    except OSError:
        return False


@PROTOCOLS
@pytest.mark.acp_process  # the agent's own process: the test's polling does not slow it
@pytest.mark.skipif(shutil.which("bwrap") is None and not os.environ.get("CI"),
                    reason="bubblewrap is not installed")
def test_cancel_ends_every_child_its_request_and_its_processes_within_a_second(
        acp_agent, acp_env, acp_workspace, server, protocol):
    stall = f.Stall()
    token = "7.31415"
    server.responder = a.Router({
        None: [a.calls(a.agent_call(0, "call_1", "IOTA run"),
                       a.agent_call(1, "call_2", "KAPPA think"))],
        "IOTA": [a.calls(a.tool("shell", "ci_1", command=f"sleep {token}"))],
        "KAPPA": [lambda: stall],
    })
    agent, sid = start(acp_agent, acp_env, acp_workspace, server, protocol)
    request_id = agent.prompt_async(sid, "go")
    agent.wait_for(lambda m: (m.get("params") or {}).get("update", {}).get("status")
                   == "in_progress" and (m["params"]["update"].get("_meta") or {}).get(
                       "term2") is not None, timeout=30)
    assert stall.reached.wait(10)
    deadline = time.monotonic() + 10
    while not in_proc(token) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert in_proc(token)
    pids = in_proc(token)
    agent.notify("session/cancel", {"sessionId": sid})
    began, bound = time.monotonic(), within(1.0)  # the second, on an idle machine
    assert stall.disconnected.wait(bound)
    while any(alive(pid) for pid in pids) and time.monotonic() - began < bound:
        time.sleep(0.01)
    assert not [pid for pid in pids if alive(pid)]
    if protocol == 1:
        end = agent.wait_for(lambda m: m.get("id") == request_id and "result" in m, timeout=10)
        assert end["result"]["stopReason"] == "cancelled"
    else:
        assert agent.wait_update(state="idle", timeout=10)["stopReason"] == "cancelled"
    updates = [m["params"]["update"] for m in agent.messages if m.get("method") ==
               "session/update"]
    shell = ids_named(updates, "shell")
    assert len(shell) == 1 and final(updates, shell[0])["status"] in ("cancelled", "failed")
    assert all(final(updates, call)["status"] in ("cancelled", "failed")
               for call in ids_named(updates, "agent"))
    assert agent.close() == 0


def marks(value):
    """Every cache_control mark in a request body."""
    if isinstance(value, dict):
        return ([value["cache_control"]] if "cache_control" in value else []) + [
            m for v in value.values() for m in marks(v)]
    if isinstance(value, list):
        return [m for v in value for m in marks(v)]
    return []


@PROTOCOLS
def test_an_anthropic_child_sends_the_parents_system_and_tools_with_cache_marks(
        acp_agent, acp_env, acp_workspace, server, protocol):
    args = json.dumps({"description": "look", "prompt": "LAMBDA look around"})
    server.responder = router = a.Router({
        None: [lambda: f.anthropic_sse(f.an_start(), f.an_tool(0, "tu_1", "agent", args),
                                       f.an_end("tool_use")),
               lambda: f.anthropic_sse(f.an_start(), f.an_text(0, "fine"), f.an_end())],
        "LAMBDA": [lambda: f.anthropic_sse(f.an_start(), f.an_text(0, "LAMBDA saw"),
                                           f.an_end())],
    })
    agent = acp_agent(args=["--provider", "anthropic", "--model", "claude-sonnet-4-5"],
                      env={"ANTHROPIC_BASE_URL": server.root_url, "ANTHROPIC_API_KEY": "x"},
                      protocol=protocol)
    sid = agent.new_session(acp_workspace, **({"mcp_servers": []} if protocol == 1 else {}))
    agent.prompt(sid, "look", timeout=60)
    parent, child = router.first(None), router.first("LAMBDA")
    assert child["system"] == parent["system"] and child["tools"] == parent["tools"]
    assert marks(child["system"]) or marks(child["tools"])
    assert marks(child["messages"])  # the conversation's own breakpoint too
    results = [b for m in router.seen[-1][2]["messages"] if isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result"]
    assert "LAMBDA saw" in json.dumps(results)
    assert agent.close() == 0


def read(path):
    try:
        with open(path) as fh:
            return fh.read()
    except FileNotFoundError:
        return None


@PROTOCOLS
@pytest.mark.skipif(shutil.which("bwrap") is None and not os.environ.get("CI"),
                    reason="bubblewrap is not installed")
def test_overlay_changes_reach_the_workspace_only_once_applied(acp_agent, acp_env,
                                                              acp_workspace, server, protocol):
    root = acp_workspace
    write(f"{root}/a.txt", "one\ntwo\n")
    write(f"{root}/b.txt", "bee\n")
    seen_before = []

    def last_round(word, answer, meddle=None):
        def reply():
            seen_before.append((read(f"{root}/a.txt"), read(f"{root}/b.txt"),
                                read(f"{root}/new.txt")))
            if meddle:
                meddle()
            return a.says(answer)()
        return reply

    def script(word, meddle=None):
        return {None: [a.calls(a.agent_call(0, "call_o", f"{word} change things",
                                            isolation="overlay")), a.says("ok")],
                word: [a.calls(a.tool("create_file", "co_1", path="new.txt", content="fresh\n"),
                               f.oa_tool(1, "co_2", "edit_file", json.dumps(
                                   {"path": "a.txt", "edits": [{"old_text": "two",
                                                                "new_text": "TWO"}]}))),
                       a.calls(a.tool("shell", "co_3", command="echo more >> b.txt")),
                       last_round(word, f"{word} changed three files", meddle)]}
    asked = []
    answer_with = answering(asked)

    server.responder = a.Router(script("MU"))
    agent, sid = start(acp_agent, acp_env, root, server, protocol)
    _, updates, _ = agent.prompt(sid, "go", timeout=60, on_request=answer_with("discard"))
    assert len(asked) == 1 and seen_before[-1] == ("one\ntwo\n", "bee\n", None)
    assert (read(f"{root}/a.txt"), read(f"{root}/b.txt"), read(f"{root}/new.txt")) == \
        ("one\ntwo\n", "bee\n", None)  # discarded
    assert "discarded" in text_of(final(updates, ids_named(updates, "agent")[0]))
    # applied: every change, the shell's too
    server.responder = a.Router(script("NU"))
    _, updates, _ = agent.prompt(sid, "go", timeout=60, on_request=answer_with("apply"))
    assert len(asked) == 2 and seen_before[-1] == ("one\ntwo\n", "bee\n", None)
    diffs = asked[-1]["toolCall"]["content"] if protocol == 1 else \
        asked[-1]["subject"]["toolCall"]["content"]
    assert len([d for d in diffs if d["type"] == "diff"]) == 3
    assert (read(f"{root}/a.txt"), read(f"{root}/b.txt"), read(f"{root}/new.txt")) == \
        ("one\nTWO\n", "bee\nmore\n", "fresh\n")
    result = [m for m in server.requests[-1].json["messages"] if m["role"] == "tool"][-1]
    assert "Applied to the workspace" in result["content"] and "+TWO" in result["content"]
    # a concurrent edit of a file the child changed: nothing applied, the conflict named
    os.remove(f"{root}/new.txt")
    write(f"{root}/a.txt", "one\ntwo\n")
    write(f"{root}/b.txt", "bee\n")
    server.responder = a.Router(script("XI", meddle=lambda: write(f"{root}/a.txt", "mine\n")))
    _, updates, _ = agent.prompt(sid, "go", timeout=60, on_request=answer_with("apply"))
    assert len(asked) == 2  # nothing to ask
    assert (read(f"{root}/a.txt"), read(f"{root}/b.txt"), read(f"{root}/new.txt")) == \
        ("mine\n", "bee\n", None)
    result = [m for m in server.requests[-1].json["messages"] if m["role"] == "tool"][-1]
    assert "Not applied" in result["content"] and "a.txt" in result["content"]
    assert agent.close() == 0


@PROTOCOLS
def test_a_child_never_does_more_than_the_sessions_mode(acp_agent, acp_env, acp_workspace,
                                                       server, protocol):
    router = a.Router({
        None: [a.calls(a.agent_call(0, "call_r", "OMICRON write")), a.says("ok")],
        "OMICRON": [a.calls(a.tool("create_file", "cr_1", path="made.txt", content="x")),
                    a.says("refused")],
    })
    server.responder = router
    agent, sid = start(acp_agent, acp_env, acp_workspace, server, protocol,
                       config=CONFIG.replace("[providers", 'mode = "read-only"\n[providers'))
    _, updates, _ = agent.prompt(sid, "go", timeout=60)
    assert not os.path.exists(os.path.join(acp_workspace, "made.txt"))
    result = [m for m in router.seen[-2][2]["messages"] if m["role"] == "tool"][0]
    assert "read-only mode" in result["content"]
    assert "READ-ONLY" in " ".join(a.texts(router.first("OMICRON")))  # its context note
    assert agent.close() == 0


@PROTOCOLS
def test_a_session_grant_covers_the_children(acp_agent, acp_env, acp_workspace, server,
                                             protocol, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    router = a.Router({
        None: [a.calls(a.tool("create_file", "p_1", path=str(outside / "one.txt"),
                              content="1")),
               a.calls(a.agent_call(0, "call_g", "RHO write there too")), a.says("ok")],
        "RHO": [a.calls(a.tool("create_file", "cr_1", path=str(outside / "two.txt"),
                               content="2")), a.says("written")],
    })
    server.responder = router
    agent, sid = start(acp_agent, acp_env, acp_workspace, server, protocol)
    asked = []
    agent.prompt(sid, "go", timeout=60, on_request=answering(asked)("allow-edit-folder-session"))
    assert len(asked) == 1  # the parent's; the child's write was covered by the grant
    assert read(str(outside / "one.txt")) == "1" and read(str(outside / "two.txt")) == "2"
    assert agent.close() == 0
