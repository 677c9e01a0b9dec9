"""OpenAIProvider on the Responses API against the fake server's /v1/responses streams."""

import json

import gevent
import pytest

from term2acp.providers.base import (
    ModelRequest,
    ProviderError,
    ProviderNotConfigured,
    Replay,
    Stop,
    TextDelta,
    ThoughtDelta,
    ToolCall,
    Usage,
)
from term2acp.providers.openai import OpenAIProvider, chat_model
from term2acp.providers.responses import input_items
from tests.support import fake_responses as fr
from tests.support.fake_llm import FakeLLMServer

KEY = "sk-test-0123456789abcdef"
READ_TOOL = {"name": "read_file", "description": "Read a file",
             "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}


@pytest.fixture
def server():
    srv = FakeLLMServer().start()
    srv.responses = True
    yield srv
    srv.stop()


def run(server, request, **kwargs):
    made = OpenAIProvider(api_key=KEY, base_url=server.openai_url, api="responses",
                          max_retries=0, **kwargs)
    with gevent.Timeout(10):
        return list(made.stream(request))


def ask(messages, **kwargs):
    return ModelRequest(model="gpt-5.2", system="You are terse.", messages=messages,
                        tools=[READ_TOOL], **kwargs)


def test_reasoning_summary_text_tool_calls_and_usage(server):
    server.enqueue(fr.Stream().reasoning("Look at a.txt.", "Then answer.", encrypted="enc-1")
                   .text("Reading.").call("call_1", "read_file", '{"pa', 'th": "a.txt"}')
                   .end(120, 30, cached=100, reasoning=12).sse())
    events = run(server, ask([{"role": "user", "content": "hi"}], effort="low",
                             cache_key="sess-1"), prompt_cache_key=True)
    assert events == [
        ThoughtDelta("Look at a.txt."), ThoughtDelta("\n\n"), ThoughtDelta("Then answer."),
        TextDelta("Reading."),
        Replay("openai-responses", [{"type": "reasoning", "encrypted_content": "enc-1",
                                     "summary": [{"type": "summary_text", "text": "Look at a.txt."},
                                                 {"type": "summary_text", "text": "Then answer."}]}]),
        ToolCall("call_1", "read_file", '{"path": "a.txt"}'),
        Usage(input_tokens=120, output_tokens=30, thought_tokens=12, cached_tokens=100),
        Stop("tool_use")]
    body = server.requests[0].json
    assert server.requests[0].path == "/v1/responses"
    assert body["instructions"] == "You are terse." and body["store"] is False
    assert body["reasoning"] == {"effort": "low", "summary": "auto"}
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["prompt_cache_key"] == "sess-1"
    assert body["tools"] == [{"type": "function", "name": "read_file", "strict": False,
                              "description": "Read a file", "parameters": READ_TOOL["parameters"]}]


def test_the_reasoning_goes_back_in_front_of_the_calls_it_preceded(server):
    replay = {"kind": "openai-responses", "items": [
        {"type": "reasoning", "summary": [], "encrypted_content": "enc-1"}]}
    history = [{"role": "user", "content": "hi"},
               {"role": "assistant", "content": "Reading.", "thought": "x", "replay": replay,
                "tool_calls": [{"id": "call_1", "name": "read_file", "arguments": "{}"}]},
               {"role": "tool", "tool_call_id": "call_1", "name": "read_file",
                "content": "bad", "is_error": True}]
    assert input_items(history) == [
        {"role": "user", "content": "hi"},
        {"type": "reasoning", "summary": [], "encrypted_content": "enc-1"},
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "Reading."}]},
        {"type": "function_call", "call_id": "call_1", "name": "read_file", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "Error: bad"}]
    # another provider's replay is not sent
    other = dict(history[1], replay={"kind": "anthropic", "items": [{"type": "thinking"}]})
    assert all(i.get("type") != "thinking" for i in input_items([history[0], other]))


@pytest.mark.parametrize("reason, stop", [("max_output_tokens", "max_tokens"),
                                          ("content_filter", "refusal")])
def test_an_incomplete_response_maps_its_reason(server, reason, stop):
    server.enqueue(fr.Stream().text("cut").end(status="incomplete", reason=reason).sse())
    assert run(server, ask([{"role": "user", "content": "hi"}]))[-1] == Stop(stop)


def test_failed_response_and_error_event_raise_the_servers_message(server):
    server.enqueue(fr.Stream().end(status="failed", error={"code": "server_error",
                                                           "message": "The server broke."}).sse(),
                   fr.error_event("Rate limit reached.", "rate_limit_exceeded"))
    with pytest.raises(ProviderError, match="The server broke."):
        run(server, ask([{"role": "user", "content": "hi"}]))
    with pytest.raises(ProviderError, match="Rate limit reached."):
        run(server, ask([{"role": "user", "content": "hi"}]))


def test_a_stream_cut_before_the_end_is_an_error(server):
    server.enqueue(fr.Stream().text("partial").sse())  # no response.completed
    with pytest.raises(ProviderError, match="ended before the model finished"):
        run(server, ask([{"role": "user", "content": "hi"}]))


def test_official_endpoint_defaults_to_responses_and_the_cache_key():
    official = OpenAIProvider(api_key=KEY, base_url="https://api.openai.com/v1")
    assert official.api == "responses" and official.sends_cache_key is True
    # another server is asked first with both (providers/compat.py); a section decides
    other = OpenAIProvider(api_key=KEY, base_url="http://127.0.0.1:9/v1")
    assert other.api == "responses" and other.sends_cache_key is True
    told = OpenAIProvider(api_key=KEY, base_url="http://127.0.0.1:9/v1", api="chat",
                          prompt_cache_key=False)
    assert told.api == "chat" and told.sends_cache_key is False
    with pytest.raises(ProviderNotConfigured, match="api must be"):
        OpenAIProvider(api_key=KEY, base_url="http://127.0.0.1:9/v1", api="completions")


def test_the_official_listing_keeps_chat_models():
    assert [m for m in ("gpt-5.2", "gpt-4o-audio-preview", "text-embedding-3-small", "o3",
                        "dall-e-3", "gpt-image-1", "chatgpt-4o-latest") if chat_model(m)] == [
        "gpt-5.2", "o3", "chatgpt-4o-latest"]


def test_fake_reasoner_refuses_a_conversation_that_lost_its_reasoning():
    reasoner = fr.Reasoner()
    reasoner.remember("call_1", "enc-1")
    call = {"type": "function_call", "call_id": "call_1", "name": "x", "arguments": "{}"}
    lost = {"input": [call, {"type": "function_call_output", "call_id": "call_1", "output": ""}]}
    assert "missing or changed" in reasoner.check(lost)
    kept = {"input": [{"type": "reasoning", "summary": [], "encrypted_content": "enc-1"}, call]}
    assert reasoner.check(kept) is None
    assert json.dumps(kept)  # plain JSON all through
