"""OpenAIProvider against a fake Chat Completions server (the providers' own HTTP client)."""

import json
import subprocess
import sys
from pathlib import Path

import gevent
import pytest

from term2acp.providers.base import (
    ModelRequest,
    ProviderError,
    ProviderNotConfigured,
    Retrying,
    Stop,
    TextDelta,
    ThoughtDelta,
    ToolCall,
    Usage,
)
from term2acp.providers.openai import OpenAIProvider, chat_params
from tests.support.fake_llm import (
    Consumer,
    FakeLLMServer,
    Status,
    closed_port,
    oa_chunk,
    oa_finish,
    oa_reasoning,
    oa_text,
    oa_tool,
    oa_usage,
    openai_sse,
)

KEY = "sk-test-0123456789abcdef"
ROOT = Path(__file__).resolve().parents[3]
READ_TOOL = {"name": "read_file", "description": "Read a file",
             "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}


@pytest.fixture
def server():
    srv = FakeLLMServer().start()
    yield srv
    srv.stop()


def provider(server, **kwargs):
    kwargs.setdefault("max_retries", 0)
    return OpenAIProvider(api_key=KEY, base_url=server.openai_url, **kwargs)


def ask(text="hi", **kwargs):
    return ModelRequest(model="fake-model", system="You are terse.",
                        messages=[{"role": "user", "content": text}], **kwargs)


def run(server, request=None, **kwargs):
    with gevent.Timeout(10):
        return list(provider(server, **kwargs).stream(request or ask()))


def test_openai_streams_text_usage_and_sends_stream_options(server):
    server.enqueue(openai_sse(oa_text("Hel"), oa_text("lo"), oa_finish("stop"),
                              oa_usage(12, 5, reasoning=2, cached=4)))
    events = run(server)
    assert events == [TextDelta("Hel"), TextDelta("lo"),
                      Usage(input_tokens=12, output_tokens=5, thought_tokens=2, cached_tokens=4),
                      Stop("end_turn")]
    sent = server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    body = sent.json
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [{"role": "system", "content": "You are terse."},
                                {"role": "user", "content": "hi"}]
    assert "reasoning_effort" not in body and "tools" not in body


def test_openai_parallel_tool_calls_accumulate_split_arguments(server):
    server.enqueue(openai_sse(
        oa_text("Reading both."),
        oa_tool(0, "call_a", "read_file", '{"pa'),
        oa_tool(1, "call_b", "read_file", ""),
        oa_tool(0, args='th": "a.txt"}'),
        oa_tool(1, args='{"path": '), oa_tool(1, args='"b.txt"}'),
        oa_finish("tool_calls")))
    events = run(server, ask(tools=[READ_TOOL]))
    assert events == [TextDelta("Reading both."),
                      ToolCall("call_a", "read_file", '{"path": "a.txt"}'),
                      ToolCall("call_b", "read_file", '{"path": "b.txt"}'),
                      Stop("tool_use")]
    assert server.requests[0].json["tools"] == [{"type": "function", "function": READ_TOOL}]


@pytest.mark.parametrize("finish, reason", [("stop", "end_turn"), ("tool_calls", "tool_use"),
                                            ("length", "max_tokens"),
                                            ("content_filter", "refusal")])
def test_openai_maps_finish_reasons(server, finish, reason):
    server.enqueue(openai_sse(oa_text("x"), oa_finish(finish)))
    assert run(server)[-1] == Stop(reason)


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_openai_reasoning_deltas_become_thoughts(server, key):
    server.enqueue(openai_sse(oa_reasoning("Let me think", key), oa_text("Done"),
                              oa_finish("stop")))
    assert run(server)[:2] == [ThoughtDelta("Let me think"), TextDelta("Done")]


def test_openai_refusal_text_maps_to_refusal_stop(server):
    server.enqueue(openai_sse(oa_chunk({"refusal": "I can't help with that."}), oa_finish("stop")))
    assert run(server) == [TextDelta("I can't help with that."), Stop("refusal")]


@pytest.mark.parametrize("effort", ["none", "minimal", "low", "medium", "high", "xhigh"])
def test_openai_effort_maps_to_reasoning_effort(server, effort):
    server.enqueue(openai_sse(oa_finish("stop")))
    run(server, ask(effort=effort, max_output_tokens=256))
    body = server.requests[0].json
    assert body["reasoning_effort"] == effort
    assert body["max_tokens"] == 256  # a compatible server gets the widely known name


def test_openai_official_endpoint_gets_max_completion_tokens():
    params = chat_params(ask(max_output_tokens=300), official=True)
    assert params["max_completion_tokens"] == 300 and "max_tokens" not in params


def test_openai_converts_multi_turn_history_with_tool_results(server):
    history = [
        {"role": "user", "content": "Read a.txt"},
        {"role": "assistant", "content": "", "thought": "need the file",
         "tool_calls": [{"id": "call_1", "name": "read_file", "arguments": '{"path": "a.txt"}'},
                        {"id": "call_2", "name": "read_file", "arguments": ""}]},
        {"role": "tool", "tool_call_id": "call_1", "name": "read_file", "content": "hello",
         "is_error": False},
        {"role": "tool", "tool_call_id": "call_2", "name": "read_file", "content": "no path",
         "is_error": True},
        {"role": "assistant", "content": "It says hello.", "thought": None, "tool_calls": []},
        {"role": "user", "content": "Thanks"},
    ]
    server.enqueue(openai_sse(oa_text("ok"), oa_finish("stop")))
    run(server, ModelRequest(model="m", system="sys", messages=history))
    assert server.requests[0].json["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "Read a.txt"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}},
            {"id": "call_2", "type": "function",
             "function": {"name": "read_file", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "hello"},
        {"role": "tool", "tool_call_id": "call_2", "content": "Error: no path"},
        {"role": "assistant", "content": "It says hello."},
        {"role": "user", "content": "Thanks"},
    ]


@pytest.mark.parametrize("status", [429, 503])
def test_openai_retries_rate_limit_and_server_errors_then_succeeds(server, status):
    server.enqueue(Status(status, {"error": {"message": "slow down"}},
                          {"Retry-After": "0", "retry-after-ms": "10"}),
                   openai_sse(oa_text("finally"), oa_finish("stop")))
    events = run(server, max_retries=2)
    reason = {429: "HTTP 429 Too Many Requests", 503: "HTTP 503 Service Unavailable"}[status]
    assert events == [Retrying(1, 0.01, reason), TextDelta("finally"), Stop("end_turn")]
    assert len(server.requests) == 2


def test_openai_authentication_failure_is_clear_and_hides_the_key(server):
    server.enqueue(Status(401, {"error": {"message": f"Incorrect API key provided: {KEY}",
                                          "code": "invalid_api_key"}}))
    with pytest.raises(ProviderError) as caught:
        run(server, max_retries=2)
    assert str(caught.value) == "openai: authentication failed (check OPENAI_API_KEY)"
    assert len(server.requests) == 1


def test_openai_status_error_carries_status_and_server_message_without_key(server):
    server.enqueue(Status(404, {"error": {"message": f"model fake-model not found ({KEY})"}}))
    with pytest.raises(ProviderError) as caught:
        run(server)
    text = str(caught.value)
    assert text.startswith("openai: HTTP 404: model fake-model not found")
    assert KEY not in text


def test_openai_error_event_in_stream_is_a_provider_error(server):
    server.enqueue(openai_sse(oa_text("par"), {"error": {"message": "upstream exploded"}}))
    with pytest.raises(ProviderError, match="upstream exploded"):
        run(server)


def test_openai_malformed_stream_data_is_a_provider_error(server):
    server.enqueue(openai_sse(oa_text("ok"), "{not json"))
    with pytest.raises(ProviderError, match="openai: malformed response from 127.0.0.1"):
        run(server)


def test_openai_unreachable_server_names_the_host():
    port = closed_port()
    stream = OpenAIProvider(api_key=KEY, base_url=f"http://127.0.0.1:{port}/v1",
                            max_retries=0, api="chat").stream(ask())
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    with pytest.raises(ProviderError, match=f"openai: cannot reach {url}: "):
        with gevent.Timeout(10):
            list(stream)


def test_openai_connection_dropped_mid_stream_is_a_provider_error(server):
    server.enqueue(openai_sse(oa_text("partial"), oa_text(" answer"), oa_finish("stop"),
                              drop_after=2))
    seen = []
    with pytest.raises(ProviderError, match="openai: lost the connection to http://127.0.0.1"):
        with gevent.Timeout(10):
            for event in provider(server).stream(ask()):
                seen.append(event)
    assert seen == [TextDelta("partial"), TextDelta(" answer")]


def test_openai_killing_the_turn_greenlet_drops_the_connection(server):
    held = openai_sse(oa_text("first"), oa_text("never"), oa_finish("stop"), hold_after=1)
    server.enqueue(held)
    consumer = Consumer(provider(server).stream(ask()))
    assert consumer.first.wait(timeout=5) and held.reached.wait(timeout=5)
    consumer.greenlet.kill(timeout=5)
    assert consumer.greenlet.dead
    assert held.disconnected.wait(timeout=5), "the server never saw the connection close"
    assert consumer.events == [TextDelta("first")]


def test_openai_held_stream_resumes_when_released(server):
    held = openai_sse(oa_text("first"), oa_text(" second"), oa_finish("stop"), hold_after=1)
    server.enqueue(held)
    consumer = Consumer(provider(server).stream(ask()))
    assert consumer.first.wait(timeout=5) and held.reached.wait(timeout=5)
    held.release()
    consumer.greenlet.join(timeout=5)
    assert consumer.greenlet.successful()
    assert consumer.events == [TextDelta("first"), TextDelta(" second"), Stop("end_turn")]


def test_openai_closing_the_generator_drops_the_connection(server):
    held = openai_sse(oa_text("first"), oa_finish("stop"), hold_after=1)
    server.enqueue(held)
    stream = provider(server).stream(ask())
    with gevent.Timeout(5):
        assert next(stream) == TextDelta("first")
    stream.close()
    assert held.disconnected.wait(timeout=5), "the server never saw the connection close"


def test_openai_key_and_base_url_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://example.test/v1")
    made = OpenAIProvider()
    assert made.base_url == "http://example.test/v1" and made._api_key == KEY


def test_openai_missing_key_is_not_configured_unless_server_is_local(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ProviderNotConfigured, match="set OPENAI_API_KEY"):
        OpenAIProvider()
    with pytest.raises(ProviderNotConfigured):
        OpenAIProvider(base_url="https://openrouter.example/api/v1")
    assert OpenAIProvider(base_url="http://localhost:11434/v1")._api_key == "not-needed"
    assert OpenAIProvider(base_url="http://[::1]:8080/v1")._api_key == "not-needed"


def test_openai_custom_named_provider_never_reads_the_openai_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with pytest.raises(ProviderNotConfigured, match="openrouter: no API key configured for https"):
        OpenAIProvider(name="openrouter", base_url="https://openrouter.example/api/v1")


def test_openai_placeholder_key_reaches_a_local_server(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.enqueue(openai_sse(oa_text("hi"), oa_finish("stop")))
    with gevent.Timeout(10):
        list(OpenAIProvider(base_url=server.openai_url).stream(ask()))
    assert server.requests[0].headers["authorization"] == "Bearer not-needed"


def test_openai_module_import_does_not_import_the_sdk():
    code = ("import json, sys\n"
            "import term2acp.providers.openai as m\n"
            "m.OpenAIProvider(api_key='k')\n"
            "print(json.dumps([n for n in ('openai', 'httpx2', 'httpx') if n in sys.modules]))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, check=True)
    assert json.loads(out.stdout) == []


def test_a_chat_only_server_asked_by_several_requests_at_once_answers_them_all(server):
    """Twenty sessions prompted at once against a compatible server without the Responses
    API: every first request goes to /responses, and each 404 sends its own request to
    Chat Completions, also the ones that come after another has learned the route is
    missing (they failed with the 404 before)."""
    server.responses = False
    server.enqueue(*[openai_sse(oa_text(f"answer {n}"), oa_finish("stop")) for n in range(4)])
    url = server.openai_url
    providers = [OpenAIProvider(api_key=KEY, base_url=url, max_retries=0) for _ in range(4)]
    with gevent.Timeout(10):
        jobs = [gevent.spawn(lambda p=p: list(p.stream(ask()))) for p in providers]
        gevent.joinall(jobs)
    assert [job.exception for job in jobs] == [None] * 4
    texts = sorted("".join(e.text for e in job.value if isinstance(e, TextDelta)) for job in jobs)
    assert texts == [f"answer {n}" for n in range(4)]
    assert len(server.no_route) == 4  # each had gone to /responses before any 404 came
