"""Issue 23: a learned context window comes only from the providers' own wordings, is
sanity-bounded, and a stored misreading is not restored on resume."""

import pytest

from term2acp.turns import context as c
from term2acp.providers.errors import ContextOverflow
from tests.unit.turns.test_context import Session


@pytest.mark.parametrize("text", [
    "context length exceeded for request 12 of the batch",
    "context window exceeded (see line 12)",
    "maximum context length is 12 tokens. However, your messages resulted in 9000 tokens.",
    "prompt is too long: 12 tokens > 3 maximum",
])
def test_a_stray_small_number_never_becomes_the_window(text):
    session = Session([], window=128_000)
    learned = c.learn_window(session, ContextOverflow(text, 400), 100_000)
    assert learned >= c.MIN_WINDOW and learned == 90_000  # 90 % of what was refused


def test_a_tiny_request_refused_learns_no_less_than_the_floor():
    session = Session([])
    assert c.learn_window(session, ContextOverflow("context window exceeded", 400), 10) == \
        c.MIN_WINDOW


@pytest.mark.parametrize("stored, restored", [(12, None), ("900", None), (True, None),
                                              (10**12, None), (64_000, 64_000)])
def test_only_a_sane_learned_window_survives_resume(stored, restored):
    session = Session([])
    c.restore(session, [{"role": "compaction", "summary": "S", "window": stored},
                        {"role": "user", "content": "u"}])
    assert session.window_learned == restored
