"""The provider's own web search (``[web_search]``) through the launcher, v1 and v2, against
the fake model servers streaming the search as the real APIs do: the request offers the
server tool, the editor sees each search as a fetch call with its results, the next
request (and one after a restart) carries the provider's search record back unchanged,
a failed search is a failed call, and with the switch off (or a provider without such a
tool) nothing is offered."""

import json
import os
import subprocess
import sys

import pytest

from tests.support import fake_llm as f
from tests.support import fake_responses as fr

PROTOCOLS = pytest.mark.parametrize("protocol", [1, 2])
RESULTS = [("https://agentclientprotocol.com/overview", "Overview - Agent Client Protocol"),
           ("https://github.com/agentclientprotocol/agent-client-protocol", "ACP on GitHub")]
ANTHROPIC = ["--provider", "anthropic", "--model", "claude-sonnet-4-5"]
RESPONSES = ["--provider", "openai", "--model", "gpt-5.2"]


@pytest.fixture
def server():
    srv = f.FakeLLMServer().start()
    srv.responses = True
    yield srv
    srv.stop()


def env_for(server, provider):
    if provider == "anthropic":
        return {"ANTHROPIC_BASE_URL": server.root_url, "ANTHROPIC_API_KEY": "sk-ant-test"}
    return {"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "sk-test-0123456789"}


def start(acp_agent, workspace, server, provider, args, protocol):
    agent = acp_agent(args=args, protocol=protocol, env=env_for(server, provider))
    return agent, agent.new_session(workspace)


def fetch_calls(updates):
    """toolCallId -> the merged fields of each fetch call, in first-report order."""
    calls = {}
    for update in updates:
        if update["sessionUpdate"] in ("tool_call", "tool_call_update"):
            merged = calls.setdefault(update["toolCallId"], {"statuses": []})
            merged.update({k: v for k, v in update.items() if k != "status"})
            if "status" in update:
                merged["statuses"].append(update["status"])
    return [c for c in calls.values() if c.get("kind") == "fetch"]


def links(call):
    return [(c["content"]["uri"], c["content"]["name"]) for c in call["content"]
            if c["type"] == "content" and c["content"]["type"] == "resource_link"]


def replayed(agent, sid, workspace, protocol):
    """A restarted agent's replay of the session (v1 session/load, v2 session/resume)."""
    start_at = len(agent.messages)
    if protocol == 1:
        answer = agent.request("session/load", {"sessionId": sid, "cwd": workspace,
                                                "mcpServers": []})
    else:
        answer = agent.request("session/resume", {"sessionId": sid, "cwd": workspace,
                                                  "replayFrom": {"type": "start"}})
    assert "result" in answer, answer
    return [m["params"]["update"] for m in agent.messages[start_at:]
            if m.get("method") == "session/update" and m["params"]["sessionId"] == sid]


def assistant_turns(body):
    return [m for m in body["messages"] if m["role"] == "assistant"]


# ---------------------------------------------------------------- Anthropic
def searching_answer():
    return f.anthropic_sse(
        f.an_start(), f.an_text(0, "Let me look that up."), f.an_search(1, "srvtoolu_01", "ACP spec"),
        f.an_search_result(2, "srvtoolu_01", RESULTS),
        f.an_cited_text(3, "ACP is a JSON-RPC protocol.", *RESULTS[0]),
        f.an_tool(4, "toolu_01", "read_file", '{"path": "notes.txt"}'),
        f.an_end("tool_use", searches=1))


@PROTOCOLS
def test_anthropic_search_is_a_fetch_call_and_its_blocks_go_back_unchanged(
        acp_agent, acp_workspace, server, configure, protocol):
    configure("[web_search]\nenabled = true\nmax_uses = 3\n")
    with open(f"{acp_workspace}/notes.txt", "w") as fh:
        fh.write("read me\n")
    server.enqueue(searching_answer(),
                   f.anthropic_sse(f.an_start(), f.an_text(0, "Done."), f.an_end()),
                   f.anthropic_sse(f.an_start(), f.an_text(0, "Again."), f.an_end()))
    agent, sid = start(acp_agent, acp_workspace, server, "anthropic", ANTHROPIC, protocol)
    _, updates, _ = agent.prompt(sid, "What is ACP?", timeout=30)
    [search] = fetch_calls(updates)
    assert search["title"] == "Web search: ACP spec"
    assert search["rawInput"] == {"type": "search", "query": "ACP spec"}
    assert search["statuses"][0] == "in_progress"
    assert search["statuses"][-1] == "completed"
    assert links(search) == RESULTS
    costs = [u["cost"]["amount"] for u in updates if u["sessionUpdate"] == "usage_update"]
    assert costs[0] >= 0.01  # the search's price, besides the tokens
    first, second = [r.json for r in server.wait_requests(2)]
    offered = dict(first["tools"][-1])
    assert offered.pop("cache_control") == {"type": "ephemeral"}  # the tool list's breakpoint
    assert offered == {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
    assert [t["name"] for t in first["tools"]].count("web_search") == 1
    # the answer's blocks go back as they came, in their order, before the tool_use
    sent = [e for _, e in searching_answer().events if e["type"] == "content_block_start"]
    blocks = assistant_turns(second)[0]["content"]
    assert [b["type"] for b in blocks] == ["text", "server_tool_use", "web_search_tool_result",
                                           "text", "tool_use"]
    assert blocks[1] == {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search",
                         "input": {"query": "ACP spec"}}
    assert blocks[2] == sent[2]["content_block"]  # encrypted_content unchanged
    assert blocks[3]["citations"][0]["encrypted_index"] == "Eo8BCioIAhgBIiQyYjQ"
    assert blocks[3]["text"] == "ACP is a JSON-RPC protocol."
    agent.close()

    # a restarted agent shows the search again, and sends the same blocks
    again = acp_agent(args=ANTHROPIC, protocol=protocol, env=env_for(server, "anthropic"))
    [shown] = fetch_calls(replayed(again, sid, acp_workspace, protocol))
    assert shown["title"] == "Web search: ACP spec" and shown["statuses"][-1] == "completed"
    assert links(shown) == RESULTS
    again.prompt(sid, "Thanks", timeout=30)
    third = server.wait_requests(3)[2].json
    assert assistant_turns(third)[0]["content"] == blocks
    again.close()


@PROTOCOLS
def test_anthropic_search_error_is_a_failed_fetch_call(acp_agent, acp_workspace, server,
                                                       configure, protocol):
    configure("[web_search]\nenabled = true\n")
    server.enqueue(f.anthropic_sse(
        f.an_start(), f.an_search(0, "srvtoolu_02", "x" * 20),
        f.an_search_result(1, "srvtoolu_02", error="max_uses_exceeded"),
        f.an_text(2, "I could not search."), f.an_end("end_turn")))
    agent, sid = start(acp_agent, acp_workspace, server, "anthropic", ANTHROPIC, protocol)
    _, updates, _ = agent.prompt(sid, "Search", timeout=30)
    [search] = fetch_calls(updates)
    assert search["statuses"][-1] == "failed"
    assert "max_uses_exceeded" in search["content"][0]["content"]["text"]
    assert server.wait_requests(1)[0].json["tools"][-1]["max_uses"] == 5  # the default
    agent.close()


def test_anthropic_paused_turn_goes_on_with_the_answer_so_far(acp_agent, acp_workspace, server,
                                                              configure):
    configure("[web_search]\nenabled = true\n")
    server.enqueue(
        f.anthropic_sse(f.an_start(), f.an_search(0, "srvtoolu_03", "long"),
                        f.an_search_result(1, "srvtoolu_03", RESULTS[:1]), f.an_end("pause_turn")),
        f.anthropic_sse(f.an_start(), f.an_text(0, "Found it."), f.an_end("end_turn")))
    agent, sid = start(acp_agent, acp_workspace, server, "anthropic", ANTHROPIC, 2)
    _, updates, idle = agent.prompt(sid, "Research", timeout=30)
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    assert "".join(u["content"]["text"] for u in updates
                   if u["sessionUpdate"] == "agent_message_chunk") == "Found it."
    second = server.wait_requests(2)[1].json
    last = second["messages"][-1]  # the paused answer, for the model to go on from
    assert last["role"] == "assistant"
    assert [b["type"] for b in last["content"]] == ["server_tool_use", "web_search_tool_result"]
    agent.close()


def test_a_cancel_during_a_search_settles_its_call(acp_agent, acp_workspace, server, configure):
    configure("[web_search]\nenabled = true\n")
    events = f.anthropic_sse(f.an_start(), f.an_search(0, "srvtoolu_04", "slow")).events
    stream = f.SSE(events + [(None, {"type": "ping"})], hold_after=len(events))  # searching
    server.enqueue(stream)
    agent, sid = start(acp_agent, acp_workspace, server, "anthropic", ANTHROPIC, 2)
    agent.prompt_async(sid, "Search")
    started = agent.wait_update("tool_call_update", kind="fetch", timeout=30)
    assert stream.reached.wait(10)
    agent.notify("session/cancel", {"sessionId": sid})
    assert agent.wait_update(state="idle", timeout=10)["stopReason"] == "cancelled"
    final = [m["params"]["update"] for m in agent.messages if m.get("method") == "session/update"
             and m["params"]["update"].get("toolCallId") == started["toolCallId"]]
    assert final[-1]["status"] == "cancelled"
    assert stream.disconnected.wait(5)
    agent.close()


# ---------------------------------------------------------------- OpenAI Responses API
def responses_config(search=True):
    return '[providers.openai]\napi = "responses"\n' + \
        ("[web_search]\nenabled = true\n" if search else "")


@PROTOCOLS
def test_responses_search_is_a_fetch_call_and_goes_back_without_its_id(
        acp_agent, acp_workspace, server, configure, protocol):
    configure(responses_config())
    with open(f"{acp_workspace}/notes.txt", "w") as fh:
        fh.write("read me\n")
    reasoner = fr.Reasoner()  # refuses an item sent back by id: store is false

    def answer(request):
        problem = reasoner.check(request.json)
        if problem:
            return fr.refuse(problem)
        number = len(server.requests)
        if number == 1:
            return (fr.Stream().search("ACP spec", [u for u, _ in RESULTS])
                    .search("nothing", status="failed")
                    .text("ACP is a protocol.").call("call_1", "read_file", '{"path": "notes.txt"}')
                    .end().sse())
        return fr.Stream().text(f"Answer {number}.").end().sse()
    server.responder = answer
    agent, sid = start(acp_agent, acp_workspace, server, "openai", RESPONSES, protocol)
    _, updates, _ = agent.prompt(sid, "What is ACP?", timeout=30)
    found, failed = fetch_calls(updates)
    assert found["title"] == "Web search: ACP spec" and found["statuses"][-1] == "completed"
    assert links(found) == [(url, url) for url, _ in RESULTS]
    assert failed["statuses"][-1] == "failed" and failed["title"] == "Web search: nothing"
    assert failed["content"][0]["content"]["text"] == \
        "Web search failed (the provider gave no reason)."
    first, second = [r.json for r in server.wait_requests(2)]
    assert {"type": "web_search"} in first["tools"] and first["max_tool_calls"] == 5
    assert "web_search_call.action.sources" in first["include"]
    carried = [i for i in second["input"] if i.get("type") == "web_search_call"]
    assert carried == [{"type": "web_search_call", "status": "completed",
                        "action": {"type": "search", "query": "ACP spec"}},
                       {"type": "web_search_call", "status": "failed",
                        "action": {"type": "search", "query": "nothing"}}]
    kinds = [i.get("type") for i in second["input"]]
    assert kinds.index("web_search_call") < kinds.index("function_call")
    agent.close()

    again = acp_agent(args=RESPONSES, protocol=protocol, env=env_for(server, "openai"))
    shown = fetch_calls(replayed(again, sid, acp_workspace, protocol))
    assert [c["statuses"][-1] for c in shown] == ["completed", "failed"]
    again.prompt(sid, "Thanks", timeout=30)
    third = server.wait_requests(3)[2].json
    assert [i for i in third["input"] if i.get("type") == "web_search_call"] == carried
    again.close()


# ---------------------------------------------------------------- the switch off
@pytest.mark.parametrize("provider, args, config", [
    ("anthropic", ANTHROPIC, ""), ("openai", RESPONSES, responses_config(search=False))])
def test_switch_off_offers_no_search(acp_agent, acp_workspace, server, configure, provider,
                                     args, config):
    configure(config)
    reply = f.anthropic_sse(f.an_start(), f.an_text(0, "ok"), f.an_end()) \
        if provider == "anthropic" else fr.Stream().text("ok").end().sse()
    server.enqueue(reply)
    agent, sid = start(acp_agent, acp_workspace, server, provider, args, 2)
    agent.prompt(sid, "hi", timeout=30)
    body = server.wait_requests(1)[0].json
    assert {t.get("type") for t in body["tools"]} <= {None, "function"}  # ours only
    assert "web_search_call.action.sources" not in body.get("include", ())
    agent.close()


def test_chat_completions_cannot_search_and_the_log_says_so_once(acp_agent, acp_workspace,
                                                                 server, configure):
    configure('[providers.openai]\napi = "chat"\n[web_search]\nenabled = true\n')
    server.enqueue(f.openai_sse(f.oa_text("one"), f.oa_finish("stop")),
                   f.openai_sse(f.oa_text("two"), f.oa_finish("stop")))
    agent, sid = start(acp_agent, acp_workspace, server, "openai",
                       ["--provider", "openai", "--model", "my-model"], 2)
    agent.prompt(sid, "hi", timeout=30)
    agent.prompt(sid, "again", timeout=30)
    bodies = [r.json for r in server.wait_requests(2)]
    assert all(t["type"] == "function" for body in bodies for t in body["tools"])
    assert agent.close() == 0
    assert agent.stderr.count("[web_search] enabled = true has no effect") == 1
    assert json.dumps(bodies).count("web_search") == 0


def test_the_terminal_client_shows_the_search_and_its_results(agent_env, workspace, server,
                                                               configure):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    configure("[web_search]\nenabled = true\n")
    server.enqueue(f.anthropic_sse(
        f.an_start(), f.an_search(0, "srvtoolu_05", "ACP spec"),
        f.an_search_result(1, "srvtoolu_05", RESULTS), f.an_text(2, "ACP is a protocol."),
        f.an_end()))
    agent = f"{sys.executable} {os.path.join(root, 'bin', 'term2-acp')}"
    done = subprocess.run(
        [sys.executable, os.path.join(root, "bin", "term2-acp-chat"), "--agent", agent,
         *ANTHROPIC, "--cwd", workspace, "What is ACP?"],
        env=dict(agent_env, **env_for(server, "anthropic")), capture_output=True, timeout=60,
        stdin=subprocess.DEVNULL)
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert "Web search: ACP spec [completed]" in out
    assert f"{RESULTS[0][1]} <{RESULTS[0][0]}>" in out and "ACP is a protocol." in out
