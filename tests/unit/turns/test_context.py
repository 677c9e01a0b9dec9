"""Context size, windows and compaction (turns/context.py), without a process."""

import pytest

from term2acp.turns import compaction
from term2acp.turns import context as c
from term2acp.core import events as ev
from term2acp.providers import base as pb
from term2acp.providers.errors import ContextOverflow


class Store:
    def __init__(self):
        self.rows = []

    def append_history(self, session_id, message):
        self.rows.append(message)


class Session:
    def __init__(self, history, window=None):
        self.id, self.model = "s1", "m"
        self.history = list(history)
        self.context_window = window
        self.window_learned = None
        self.store = Store()
        self.events = []
        self.provider = None

    def emit(self, event):
        self.events.append(event)


class Summarizer(pb.Provider):
    def __init__(self, text="SUMMARY", overflow_first=0):
        self.requests = []
        self.text = text
        self.overflow_first = overflow_first

    def stream(self, request):
        self.requests.append(request)
        if self.overflow_first:
            self.overflow_first -= 1
            raise ContextOverflow("x: maximum context length is 100 tokens", 400)
        yield pb.TextDelta(self.text)
        yield pb.Usage(input_tokens=10, output_tokens=3)
        yield pb.Stop("end_turn")


def exchange(n, size=400, tools=0):
    """A user message, an assistant answer with ``tools`` calls and their results."""
    out = [{"role": "user", "content": f"u{n} " + "x" * size}]
    calls = [{"id": f"c{n}_{i}", "name": "read_file", "arguments": "{}"} for i in range(tools)]
    out.append({"role": "assistant", "content": f"a{n}", "tool_calls": calls})
    out += [{"role": "tool", "tool_call_id": call["id"], "name": "read_file",
             "content": "r" * size, "is_error": False} for call in calls]
    if tools:
        out.append({"role": "assistant", "content": f"done {n}", "tool_calls": []})
    return out


def test_estimate_is_about_four_characters_a_token():
    messages = [{"role": "user", "content": "x" * 4000}]
    assert 1000 < c.estimate("", messages) < 1010
    assert c.estimate("s" * 400, []) == 100


def test_units_never_separate_a_tool_call_from_its_result():
    history = exchange(1, tools=2) + exchange(2, tools=1)
    parts = c.units(history)
    for unit in parts:
        calls = {call["id"] for m in unit if m["role"] == "assistant" for call in m["tool_calls"]}
        results = {m["tool_call_id"] for m in unit if m["role"] == "tool"}
        assert calls == results
    assert sum(map(len, parts)) == len(history)


@pytest.mark.parametrize("text, used, expected", [
    ("This model's maximum context length is 1500 tokens. However, your messages resulted "
     "in 1800 tokens.", 900, 750),
    ("prompt is too long: 210000 tokens > 200000 maximum", 100_000, 95_238),
    ("context window exceeded", 1000, 900),
])
def test_the_window_is_learned_from_the_overflow_error(text, used, expected):
    session = Session([])
    assert c.learn_window(session, ContextOverflow(text, 400), used) == expected
    assert c.window_of(session) == expected


def test_a_learned_window_never_grows_and_beats_the_config():
    session = Session([], window=10_000)
    c.learn_window(session, ContextOverflow("context window exceeded", 400), 2000)
    c.learn_window(session, ContextOverflow("context window exceeded", 400), 5000)
    assert c.window_of(session) == 1800


def test_compaction_keeps_recent_exchanges_and_the_store_keeps_everything():
    history = [m for n in range(1, 9) for m in exchange(n, tools=1)]
    session = Session(history, window=2000)
    provider = Summarizer()
    done = compaction.compact(session, provider, system="SYS", reason="threshold")
    assert session.history[0]["role"] == "compaction" and session.history[0]["summary"] == "SUMMARY"
    kept = session.history[1:]
    assert kept and kept[0]["role"] == "user" and kept == history[-len(kept):]
    assert done.after < done.before and done.folded == len(history) - len(kept)
    assert session.store.rows == session.history  # marker + copies appended; old rows stay
    assert [e.status for e in session.events if isinstance(e, ev.CompactionReported)] == \
        ["in_progress", "completed"]
    # the summarizer saw the older part, as text, and no tools
    request = provider.requests[0]
    assert request.purpose == "compaction" and request.tools == []
    assert "u1 " in request.messages[0]["content"] and "u8 " not in request.messages[0]["content"]
    # the provider receives the summary merged into the next user message
    sent = c.model_messages(session.history)
    assert sent[0]["role"] == "user" and sent[0]["content"].startswith(c.SUMMARY_HEADER)
    assert all(m["role"] != "compaction" for m in sent)


def test_resume_continues_from_the_last_compaction():
    history = exchange(1) + [{"role": "compaction", "summary": "S1", "window": 900}] + \
        exchange(2) + [{"role": "compaction", "summary": "S2", "window": 800}] + exchange(3)
    session = Session([])
    c.restore(session, history)
    assert session.history[0]["summary"] == "S2" and len(session.history) == 3
    assert session.window_learned == 800


def test_nothing_older_to_summarize_is_a_clear_failure():
    session = Session([{"role": "user", "content": "x" * 20_000}], window=1000)
    with pytest.raises(compaction.CompactionFailed, match="latest exchange alone"):
        compaction.compact(session, Summarizer(), reason="overflow")
    assert not session.events


def test_an_overflowing_summary_request_is_retried_in_smaller_pieces():
    history = [m for n in range(1, 30) for m in exchange(n)]
    session = Session(history, window=3000)
    provider = Summarizer(overflow_first=1)
    compaction.compact(session, provider, reason="threshold")
    assert len(provider.requests) >= 2


def test_a_huge_tool_result_is_cut_with_a_note():
    text = "y" * 200_000
    cut = c.cap_result(text, c.result_cap(4000, 100_000))
    assert len(cut) == 4000 and "output truncated" in cut
    assert c.cap_result("short", 10) == "short"


def test_the_guard_compacts_and_resends_on_overflow():
    history = [m for n in range(1, 6) for m in exchange(n, size=800)]
    session = Session(history)

    class Model(Summarizer):
        def stream(self, request):
            if request.purpose == "compaction":
                yield from super().stream(request)
                return
            self.requests.append(request)
            size = c.estimate(request.system, request.messages)
            if size > 900:
                raise ContextOverflow(f"maximum context length is 1000 tokens. However, your "
                                      f"messages resulted in {size} tokens.", 400)
            yield pb.TextDelta("answer")
            yield pb.Stop("end_turn")

    provider = Model()
    guard = compaction.ContextGuard(session, provider, None)
    request = pb.ModelRequest(model="m", system="S", messages=guard.messages("S"))
    items = list(guard.stream(request))
    assert items[0] == pb.TextDelta("answer")
    assert session.window_learned and session.history[0]["role"] == "compaction"
    turns = [r for r in provider.requests if r.purpose == "turn"]
    assert len(turns) == 2 and c.estimate("S", turns[1].messages) <= 900


def test_past_the_threshold_with_nothing_to_summarize_the_request_still_goes():
    session = Session([{"role": "user", "content": "x" * 3400}], window=1000)  # ~85 %
    guard = compaction.ContextGuard(session, Summarizer(), None)
    assert guard.messages("") == session.history
    session.history = [{"role": "user", "content": "x" * 4400}]  # over the window itself
    with pytest.raises(compaction.CompactionFailed, match="latest exchange alone"):
        guard.messages("")


def test_the_latest_request_is_kept_even_when_it_is_big():
    history = [m for n in range(1, 5) for m in exchange(n)] + [
        {"role": "user", "content": "LATEST " + "z" * 2400}]
    session = Session(history, window=1000)
    compaction.compact(session, Summarizer(), reason="threshold")
    assert session.history[-1]["content"].startswith("LATEST")
    assert [m["role"] for m in session.history] == ["compaction", "user"]


def test_an_empty_summary_fails_once_with_its_reason():
    session = Session([m for n in range(1, 5) for m in exchange(n)], window=1000)
    with pytest.raises(compaction.CompactionFailed) as failure:
        compaction.compact(session, Summarizer(text="  "), reason="threshold")
    assert str(failure.value) == "compacting failed because the model returned an empty summary"
    assert session.events[-1].status == "failed"
