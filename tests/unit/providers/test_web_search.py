"""The providers' own web search: the stream decoding into WebSearch events, what goes back
in later requests (Anthropic's blocks in their order, the Responses API's items without
ids), and the request options; against the fake servers on loopback."""

import json
import logging

import gevent
import pytest

from term2acp.turns import websearch
from term2acp.providers.anthropic import AnthropicProvider, message_params
from term2acp.providers import prices
from term2acp.providers.base import (
    ModelRequest,
    Replay,
    Stop,
    TextDelta,
    ToolCall,
    Usage,
    WebSearch,
)
from term2acp.providers.openai import OpenAIProvider
from term2acp.settings import Settings
from tests.support import fake_llm as f
from tests.support import fake_responses as fr

SEARCH = {"max_uses": 2}
READ_TOOL = {"name": "read_file", "description": "Read a file",
             "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}
RESULTS = [("https://example.com/a", "A"), ("https://example.com/b", "B")]


@pytest.fixture
def server():
    srv = f.FakeLLMServer().start()
    srv.responses = True
    yield srv
    srv.stop()


def drain(provider, request):
    with gevent.Timeout(10):
        return list(provider.stream(request))


def anthropic(server):
    return AnthropicProvider(api_key="sk-ant-test", base_url=server.root_url, max_retries=0)


def ask(*messages, **kwargs):
    kwargs.setdefault("tools", [READ_TOOL])
    kwargs.setdefault("model", "claude-sonnet-4-5")
    return ModelRequest(system="s", messages=list(messages), **kwargs)


def stored(events, text):
    """The assistant message the turn stores for these events (as the store keeps it)."""
    replay = next(e for e in events if isinstance(e, Replay))
    calls = [{"id": e.call_id, "name": e.name, "arguments": e.arguments}
             for e in events if isinstance(e, ToolCall)]
    return json.loads(json.dumps({"role": "assistant", "content": text, "tool_calls": calls,
                                  "replay": {"kind": replay.kind, "items": replay.items}}))


def test_anthropic_search_events_and_the_blocks_kept_in_stream_order(server):
    server.enqueue(f.anthropic_sse(
        f.an_start(), f.an_thinking(0, "Search it.", signature="sig-1"), f.an_text(1, "Looking."),
        f.an_search(2, "srvtoolu_1", "acp"), f.an_search_result(3, "srvtoolu_1", RESULTS),
        f.an_cited_text(4, "Found.", *RESULTS[0]),
        f.an_tool(5, "toolu_1", "read_file", '{"path": "a"}'), f.an_end("tool_use", searches=1)))
    user = {"role": "user", "content": "find"}
    events = drain(anthropic(server), ask(user, web_search=SEARCH, effort="low"))
    searches = [e for e in events if isinstance(e, WebSearch)]
    assert searches == [
        WebSearch("srvtoolu_1", "in_progress"),
        WebSearch("srvtoolu_1", "in_progress", {"type": "search", "query": "acp"}),
        WebSearch("srvtoolu_1", "completed", results=[{"url": u, "title": t} for u, t in RESULTS])]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Looking.", "Found."]
    assert next(e for e in events if isinstance(e, Usage)).web_searches == 1  # billed apiece
    assert events[-1] == Stop("tool_use")
    body = server.requests[0].json
    assert body["tools"][-1]["type"] == "web_search_20250305"
    assert body["tools"][-1]["max_uses"] == 2
    answer = stored(events, "Looking.Found.")
    assert [b["type"] for b in answer["replay"]["items"]] == [
        "thinking", "text", "server_tool_use", "web_search_tool_result", "text"]
    result = f.an_search_result(3, "srvtoolu_1", RESULTS)[0]["content_block"]  # as it came
    follow = [user, answer, {"role": "tool", "tool_call_id": "toolu_1", "name": "read_file",
                             "content": "x", "is_error": False}]
    # thinking on: every block, in order, then the tool_use
    blocks = message_params(ask(*follow, web_search=SEARCH, effort="low"))["messages"][1]["content"]
    assert [b["type"] for b in blocks] == ["thinking", "text", "server_tool_use",
                                           "web_search_tool_result", "text", "tool_use"]
    assert blocks[3] == result and blocks[4]["citations"][0]["url"] == RESULTS[0][0]
    # thinking off: the search blocks stay, the thinking goes
    blocks = message_params(ask(*follow, web_search=SEARCH))["messages"][1]["content"]
    assert [b["type"] for b in blocks] == ["text", "server_tool_use", "web_search_tool_result",
                                           "text", "tool_use"]
    # search not offered (switched off since): the plain text, as for any answer
    blocks = message_params(ask(*follow))["messages"][1]["content"]
    assert blocks == [{"type": "text", "text": "Looking.Found."},
                      {"type": "tool_use", "id": "toolu_1", "name": "read_file",
                       "input": {"path": "a"}}]


def test_anthropic_search_error_and_a_tool_of_ours_named_web_search(server, caplog):
    server.enqueue(f.anthropic_sse(
        f.an_start(), f.an_search(0, "srvtoolu_2", "q"),
        f.an_search_result(1, "srvtoolu_2", error="too_many_requests"), f.an_end()))
    events = drain(anthropic(server), ask({"role": "user", "content": "q"}, web_search=SEARCH))
    assert WebSearch("srvtoolu_2", "failed", error="too_many_requests") in events
    mine = dict(READ_TOOL, name="web_search")
    with caplog.at_level(logging.WARNING):
        params = message_params(ask({"role": "user", "content": "q"}, tools=[mine],
                                    web_search=SEARCH))
    assert [t.get("type") for t in params["tools"]] == [None]
    assert "named web_search" in caplog.text


def test_anthropic_pause_turn_is_a_pause(server):
    server.enqueue(f.anthropic_sse(f.an_start(), f.an_search(0, "s", "q"), f.an_end("pause_turn")))
    events = drain(anthropic(server), ask({"role": "user", "content": "q"}, web_search=SEARCH))
    assert events[-1] == Stop("pause")
    # the unanswered search goes back for the server to go on with
    assert [b["type"] for b in stored(events, "")["replay"]["items"]] == ["server_tool_use"]


def test_responses_search_events_include_and_replay_without_ids(server):
    server.enqueue(fr.Stream().reasoning("r", encrypted="enc-1")
                   .search("acp", [u for u, _ in RESULTS]).text("Done.").end().sse())
    made = OpenAIProvider(api_key="sk-test", base_url=server.openai_url, api="responses",
                          max_retries=0)
    user = {"role": "user", "content": "find"}
    events = drain(made, ask(user, model="gpt-5.2", effort="low", web_search=SEARCH))
    action = {"type": "search", "query": "acp"}
    assert [e for e in events if isinstance(e, WebSearch)] == [
        WebSearch("ws_1", "in_progress"),
        WebSearch("ws_1", "completed", action, results=[{"url": u, "title": ""}
                                                         for u, _ in RESULTS])]
    assert next(e for e in events if isinstance(e, Usage)).web_searches == 1
    body = server.requests[0].json
    assert body["include"] == ["web_search_call.action.sources", "reasoning.encrypted_content"]
    assert body["tools"][-1] == {"type": "web_search"} and body["max_tool_calls"] == 2
    answer = stored(events, "Done.")
    assert answer["replay"]["items"] == [
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "r"}],
         "encrypted_content": "enc-1"},
        {"type": "web_search_call", "status": "completed", "action": action}]
    assert fr.Reasoner().check({"store": False, "input": answer["replay"]["items"]}) is None
    # a model that reasons without an effort still asks for both
    server.enqueue(fr.Stream().text("ok").end().sse())
    drain(made, ask(user, model="gpt-5.2", web_search=SEARCH))
    assert set(server.requests[1].json["include"]) == {"web_search_call.action.sources",
                                                       "reasoning.encrypted_content"}


def test_option_follows_the_switch_and_warns_once_for_a_provider_without_search(caplog):
    settings = Settings()

    class Chat:
        name, web_search = "chatty", False

    class Searching:
        name, web_search = "anthropic", True
    assert websearch.option(settings, Searching()) is None  # off by default
    settings.web_search.enabled, settings.web_search.max_uses = True, 7
    assert websearch.option(settings, Searching()) == {"max_uses": 7}
    with caplog.at_level(logging.WARNING):
        assert websearch.option(settings, Chat()) is None
        assert websearch.option(settings, Chat()) is None
    assert caplog.text.count("no effect with provider chatty") == 1


def test_results_are_links_when_they_are_web_addresses():
    items = websearch.results_content(
        [{"url": "https://a.example/x?y=1", "title": "A"}, {"url": "javascript:alert(1)",
                                                             "title": "J"},
         {"url": "https://b.example/has space", "title": ""}]
        + [{"url": f"https://c.example/{n}", "title": ""} for n in range(30)])
    assert items[0] == {"type": "link", "uri": "https://a.example/x?y=1", "name": "A"}
    assert items[1] == {"type": "text", "text": "J javascript:alert(1)"}
    assert items[2]["type"] == "text"
    assert len(items) == websearch.MAX_LINKS + 1 and items[-1]["text"] == "... and 13 more."
    assert websearch.results_content([]) == [{"type": "text", "text": "No results."}]


def test_the_context_estimate_counts_the_results_an_answer_carries_back():
    from term2acp.turns.context import message_chars

    result = f.an_search_result(1, "s", RESULTS)[0]["content_block"]
    plain = {"role": "assistant", "content": "Found.", "tool_calls": []}
    searched = dict(plain, replay={"kind": "anthropic", "items": [result]})
    carried = sum(len(r["encrypted_content"]) + len(r["title"]) for r in result["content"])
    assert message_chars(searched) == message_chars(plain) + carried


def test_each_search_costs_a_cent_besides_the_tokens():
    tokens = Usage(input_tokens=1_000_000, output_tokens=0)
    searched = Usage(input_tokens=1_000_000, output_tokens=0, web_searches=3)
    assert prices.cost("claude-sonnet-4-5", tokens) == pytest.approx(3.0)
    assert prices.cost("claude-sonnet-4-5", searched) == pytest.approx(3.03)
    assert prices.cost("unpriced-model", searched) is None
