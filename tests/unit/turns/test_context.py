"""Context size, windows and history views (turns/context.py), without a process; the
sessions and the summarizer here serve test_compaction.py and test_context_window.py too."""

import pytest

from term2acp.turns import context as c
from term2acp.providers import base as pb
from term2acp.providers.errors import ContextOverflow
from tests.support.turnsession import TurnSessionStub


class Store:
    def __init__(self):
        self.rows = []

    def append_history(self, session_id, message):
        self.rows.append(message)


class Session(TurnSessionStub):
    def __init__(self, history, window=None):
        super().__init__(store=Store())
        self.history = list(history)
        self.context_window = window


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


def test_resume_continues_from_the_last_compaction():
    history = exchange(1) + [{"role": "compaction", "summary": "S1", "window": 900}] + \
        exchange(2) + [{"role": "compaction", "summary": "S2", "window": 800}] + exchange(3)
    session = Session([])
    c.restore(session, history)
    assert session.history[0]["summary"] == "S2" and len(session.history) == 3
    assert session.window_learned == 800


def test_a_huge_tool_result_is_cut_with_a_note():
    text = "y" * 200_000
    cut = c.cap_result(text, c.result_cap(4000, 100_000))
    assert len(cut) == 4000 and "output truncated" in cut
    assert c.cap_result("short", 10) == "short"
