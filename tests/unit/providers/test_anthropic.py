"""AnthropicProvider against a fake Messages server (the providers' own HTTP client)."""

import json
import subprocess
import sys
from pathlib import Path

import gevent
import pytest

from term2acp.providers.anthropic import AnthropicProvider
from term2acp.providers.base import (
    ModelRequest,
    ProviderError,
    ProviderNotConfigured,
    Replay,
    Retrying,
    Stop,
    TextDelta,
    ThoughtDelta,
    ToolCall,
    Usage,
)
from tests.support.fake_llm import (
    REASONS,
    Consumer,
    FakeLLMServer,
    Status,
    closed_port,
    an_end,
    an_start,
    an_text,
    an_thinking,
    an_tool,
    anthropic_sse,
)

KEY = "sk-ant-test-0123456789abcdef"
ROOT = Path(__file__).resolve().parents[3]
READ_TOOL = {"name": "read_file", "description": "Read a file",
             "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}
OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


@pytest.fixture
def server():
    srv = FakeLLMServer().start()
    yield srv
    srv.stop()


def provider(server, **kwargs):
    kwargs.setdefault("max_retries", 0)
    return AnthropicProvider(api_key=KEY, base_url=server.root_url, **kwargs)


def ask(text="hi", **kwargs):
    return ModelRequest(model="fake-model", system="You are terse.",
                        messages=[{"role": "user", "content": text}], **kwargs)


def run(server, request=None, made=None, **kwargs):
    with gevent.Timeout(10):
        return list((made or provider(server, **kwargs)).stream(request or ask()))


def test_anthropic_streams_text_and_usage(server):
    server.enqueue(anthropic_sse(an_start(input_tokens=20, cache_read=100, cache_write=5),
                                 an_text(0, "Hel", "lo"), an_end("end_turn", output_tokens=7)))
    events = run(server)
    assert events == [TextDelta("Hel"), TextDelta("lo"),
                      Usage(input_tokens=125, output_tokens=7, cached_tokens=100, cache_write_tokens=5),
                      Stop("end_turn")]
    sent = server.requests[0]
    assert sent.path == "/v1/messages"
    # The key travels as x-api-key (older SDKs) or a bearer token (this one).
    assert KEY in (sent.headers.get("x-api-key"), sent.headers.get("authorization", "")[7:])
    body = sent.json
    assert body["stream"] is True and body["max_tokens"] == 8192
    cache = {"type": "ephemeral"}  # the breakpoints (prompt caching is on by default)
    assert body["system"] == [{"type": "text", "text": "You are terse.", "cache_control": cache}]
    assert body["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "hi", "cache_control": cache}]}]
    assert "thinking" not in body and "tools" not in body


def test_anthropic_thinking_and_parallel_tool_calls_with_split_json(server):
    server.enqueue(anthropic_sse(
        an_start(), an_thinking(0, "Two files", " needed."),
        an_tool(1, "toolu_a", "read_file", '{"pa', 'th": "a.txt"}'),
        an_tool(2, "toolu_b", "read_file", '{"path":', ' "b.txt"}'),
        an_tool(3, "toolu_c", "list_dir"),
        an_end("tool_use", output_tokens=40, thinking_tokens=12)))
    events = run(server, ask(tools=[READ_TOOL], effort="medium"))
    assert events == [ThoughtDelta("Two files"), ThoughtDelta(" needed."),
                      Replay("anthropic", [{"type": "thinking", "thinking": "Two files needed.",
                                            "signature": "sig-fake"}]),
                      ToolCall("toolu_a", "read_file", '{"path": "a.txt"}'),
                      ToolCall("toolu_b", "read_file", '{"path": "b.txt"}'),
                      ToolCall("toolu_c", "list_dir", "{}"),
                      Usage(input_tokens=10, output_tokens=40, thought_tokens=12),
                      Stop("tool_use")]
    assert server.requests[0].json["tools"] == [{
        "name": "read_file", "description": "Read a file",
        "input_schema": READ_TOOL["parameters"], "cache_control": {"type": "ephemeral"}}]


@pytest.mark.parametrize("stop, reason", [("end_turn", "end_turn"), ("stop_sequence", "end_turn"),
                                          ("tool_use", "tool_use"), ("max_tokens", "max_tokens"),
                                          ("refusal", "refusal")])
def test_anthropic_maps_stop_reasons(server, stop, reason):
    server.enqueue(anthropic_sse(an_start(), an_text(0, "x"), an_end(stop)))
    assert run(server)[-1] == Stop(reason)


@pytest.mark.parametrize("effort, budget", [("default", None), ("none", None), ("minimal", None),
                                            ("low", 1024), ("medium", 4096), ("high", 16384),
                                            ("xhigh", 32000)])
def test_anthropic_effort_maps_to_thinking_budget(server, effort, budget):
    server.enqueue(anthropic_sse(an_start(), an_end()))
    run(server, ask(effort=effort))
    body = server.requests[0].json
    if budget is None:
        assert "thinking" not in body and body["max_tokens"] == 8192
    else:
        assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
        assert body["max_tokens"] > budget


def test_anthropic_explicit_max_tokens_is_a_hard_cap(server):
    server.enqueue(anthropic_sse(an_start(), an_end()), anthropic_sse(an_start(), an_end()))
    run(server, ask(effort="high", max_output_tokens=10000))
    run(server, ask(effort="high", max_output_tokens=1500))
    capped, tiny = (r.json for r in server.requests)
    assert capped["max_tokens"] == 10000 and capped["thinking"]["budget_tokens"] == 5000
    assert tiny["max_tokens"] == 1500 and "thinking" not in tiny


def test_anthropic_converts_multi_turn_history_with_tool_results(server):
    history = [
        {"role": "user", "content": "Read a.txt and b.txt"},
        {"role": "assistant", "content": "Reading.", "thought": "dropped from history",
         "tool_calls": [{"id": "toolu_1", "name": "read_file", "arguments": '{"path": "a.txt"}'},
                        {"id": "toolu_2", "name": "read_file", "arguments": '{"path": '}]},
        {"role": "tool", "tool_call_id": "toolu_1", "name": "read_file", "content": "hello",
         "is_error": False},
        {"role": "tool", "tool_call_id": "toolu_2", "name": "read_file",
         "content": "bad arguments", "is_error": True},
        {"role": "assistant", "content": "a says hello.", "thought": None, "tool_calls": []},
        {"role": "user", "content": "Thanks"},
    ]
    server.enqueue(anthropic_sse(an_start(), an_text(0, "ok"), an_end()))
    run(server, ModelRequest(model="m", system="sys", messages=history), prompt_cache=False)
    assert server.requests[0].json["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Read a.txt and b.txt"}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.txt"}},
            {"type": "tool_use", "id": "toolu_2", "name": "read_file",
             "input": {"_raw_arguments": '{"path": '}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": False,
             "content": "hello"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": True,
             "content": "bad arguments"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "a says hello."}]},
        {"role": "user", "content": [{"type": "text", "text": "Thanks"}]},
    ]


def test_anthropic_resends_signed_thinking_in_the_tool_loop(server):
    server.enqueue(anthropic_sse(an_start(), an_thinking(0, "Need a.txt", signature="sig-1"),
                                 an_tool(1, "toolu_1", "read_file", '{"path": "a.txt"}'),
                                 an_end("tool_use")),
                   anthropic_sse(an_start(), an_text(0, "done"), an_end()))
    first = ask("read a.txt", effort="low")
    replay = next(e for e in run(server, first) if isinstance(e, Replay))
    answered = [{"role": "tool", "tool_call_id": "toolu_1", "name": "read_file",
                 "content": "hello", "is_error": False}]
    assistant = {"role": "assistant", "content": "", "thought": "Need a.txt",
                 "tool_calls": [{"id": "toolu_1", "name": "read_file",
                                 "arguments": '{"path": "a.txt"}'}]}
    # the turn stores the replay with the assistant message (so a restart keeps it)
    stored = json.loads(json.dumps(dict(assistant, replay={"kind": replay.kind,
                                                           "items": replay.items})))
    follow_up = ModelRequest(model="m", system="", effort="low",
                             messages=first.messages + [stored] + answered)
    run(server, follow_up)  # a fresh provider: nothing held in memory
    body = server.requests[1].json
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert body["messages"][1]["content"][0] == {
        "type": "thinking", "thinking": "Need a.txt", "signature": "sig-1"}
    # A history without the signed blocks: thinking is switched off instead.
    server.enqueue(anthropic_sse(an_start(), an_text(0, "done"), an_end()))
    run(server, ModelRequest(model="m", system="", effort="low",
                             messages=first.messages + [assistant] + answered))
    body = server.requests[2].json
    assert "thinking" not in body
    assert body["messages"][1]["content"][0]["type"] == "tool_use"


def test_anthropic_cache_breakpoints_tools_system_and_the_latest_two_user_turns(server):
    history = [{"role": "user", "content": "one"},
               {"role": "assistant", "content": "", "thought": None, "tool_calls": [
                   {"id": "t1", "name": "read_file", "arguments": "{}"}]},
               {"role": "tool", "tool_call_id": "t1", "name": "read_file", "content": "x",
                "is_error": False},
               {"role": "assistant", "content": "", "thought": None, "tool_calls": [
                   {"id": "t2", "name": "read_file", "arguments": "{}"}]},
               {"role": "tool", "tool_call_id": "t2", "name": "read_file", "content": "y",
                "is_error": False}]
    before = json.dumps(history)
    server.enqueue(anthropic_sse(an_start(), an_text(0, "ok"), an_end()))
    run(server, ModelRequest(model="m", system="sys", messages=history, tools=[READ_TOOL]),
        cache_ttl="1h")
    body = server.requests[0].json
    cache = {"type": "ephemeral", "ttl": "1h"}
    marked = [block for part in (body["tools"], body["system"],
                                 *(m["content"] for m in body["messages"]))
              for block in part if "cache_control" in block]
    assert len(marked) == 4 and all(b["cache_control"] == cache for b in marked)
    assert [b.get("tool_use_id") or b.get("name") or b.get("text") for b in marked] == [
        "read_file", "sys", "t1", "t2"]
    assert json.dumps(history) == before  # the history itself is never marked


def test_anthropic_rejects_an_unknown_cache_ttl():
    with pytest.raises(ProviderNotConfigured, match="cache_ttl"):
        AnthropicProvider(api_key="k", base_url="http://127.0.0.1:9", cache_ttl="2h")


@pytest.mark.parametrize("status", [429, 529])
def test_anthropic_retries_rate_limit_and_overload_then_succeeds(server, status):
    server.enqueue(Status(status, OVERLOADED, {"Retry-After": "0", "retry-after-ms": "10"}),
                   anthropic_sse(an_start(), an_text(0, "finally"), an_end()))
    events = run(server, max_retries=2)
    assert events[0] == Retrying(1, 0.01, f"HTTP {status} {REASONS.get(status, 'Status')}")
    assert events[1] == TextDelta("finally") and events[-1] == Stop("end_turn")
    assert len(server.requests) == 2


def test_anthropic_authentication_failure_is_clear_and_hides_the_key(server):
    server.enqueue(Status(401, {"type": "error", "error": {
        "type": "authentication_error", "message": f"invalid x-api-key {KEY}"}}))
    with pytest.raises(ProviderError) as caught:
        run(server, max_retries=2)
    assert str(caught.value) == "anthropic: authentication failed (check ANTHROPIC_API_KEY)"
    assert len(server.requests) == 1


def test_anthropic_status_error_carries_status_and_message_without_key(server):
    server.enqueue(Status(400, {"type": "error", "error": {
        "type": "invalid_request_error", "message": f"max_tokens too large ({KEY})"}}))
    with pytest.raises(ProviderError) as caught:
        run(server)
    text = str(caught.value)
    assert text.startswith("anthropic: HTTP 400: max_tokens too large")
    assert KEY not in text


def test_anthropic_error_event_mid_stream_is_a_provider_error(server):
    server.enqueue(anthropic_sse(an_start(), an_text(0, "par"), OVERLOADED))
    with pytest.raises(ProviderError, match="anthropic: stream error: Overloaded"):
        run(server)


def test_anthropic_stream_ending_without_a_stop_reason_is_an_error(server):
    server.enqueue(anthropic_sse(an_start(), an_text(0, "cut")))
    with pytest.raises(ProviderError, match="ended before the model finished"):
        run(server)


def test_anthropic_malformed_stream_data_is_a_provider_error(server):
    server.enqueue(anthropic_sse(an_start(), ("content_block_delta", "{not json")))
    with pytest.raises(ProviderError, match="anthropic: malformed response from 127.0.0.1"):
        run(server)


def test_anthropic_unreachable_server_names_the_host():
    port = closed_port()
    made = AnthropicProvider(api_key=KEY, base_url=f"http://127.0.0.1:{port}", max_retries=0)
    url = f"http://127.0.0.1:{port}/v1/messages"
    with pytest.raises(ProviderError, match=f"anthropic: cannot reach {url}: "):
        with gevent.Timeout(10):
            list(made.stream(ask()))


def test_anthropic_connection_dropped_mid_stream_is_a_provider_error(server):
    server.enqueue(anthropic_sse(an_start(), an_text(0, "partial", " answer"), an_end(),
                                 drop_after=4))
    seen = []
    with pytest.raises(ProviderError, match="anthropic: lost the connection to http://127.0.0.1"):
        with gevent.Timeout(10):
            for event in provider(server).stream(ask()):
                seen.append(event)
    assert seen == [TextDelta("partial"), TextDelta(" answer")]


def test_anthropic_killing_the_turn_greenlet_drops_the_connection(server):
    held = anthropic_sse(an_start(), an_text(0, "first", "never"), an_end(), hold_after=3)
    server.enqueue(held)
    consumer = Consumer(provider(server).stream(ask()))
    assert consumer.first.wait(timeout=5) and held.reached.wait(timeout=5)
    consumer.greenlet.kill(timeout=5)
    assert consumer.greenlet.dead
    assert held.disconnected.wait(timeout=5), "the server never saw the connection close"
    assert consumer.events == [TextDelta("first")]


def test_anthropic_closing_the_generator_drops_the_connection(server):
    held = anthropic_sse(an_start(), an_text(0, "first", "never"), an_end(), hold_after=3)
    server.enqueue(held)
    stream = provider(server).stream(ask())
    with gevent.Timeout(5):
        assert next(stream) == TextDelta("first")
    stream.close()
    assert held.disconnected.wait(timeout=5), "the server never saw the connection close"


def test_anthropic_key_and_base_url_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://example.test")
    made = AnthropicProvider()
    assert made.base_url == "http://example.test" and made._api_key == KEY


def test_anthropic_missing_key_is_not_configured_unless_server_is_local(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    with pytest.raises(ProviderNotConfigured, match="set ANTHROPIC_API_KEY"):
        AnthropicProvider()
    assert AnthropicProvider(base_url="http://127.0.0.1:9/")._api_key == "not-needed"


def test_anthropic_module_import_does_not_import_the_sdk():
    code = ("import json, sys\n"
            "import term2acp.providers.anthropic as m\n"
            "m.AnthropicProvider(api_key='k')\n"
            "print(json.dumps([n for n in ('anthropic', 'openai', 'httpx2', 'httpx')"
            " if n in sys.modules]))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, check=True)
    assert json.loads(out.stdout) == []
