"""Compaction (turns/compaction.py): the summarizer, what is kept, the guard around a
model request; without a process."""

import pytest

from term2acp.core import events as ev
from term2acp.providers import base as pb
from term2acp.providers.errors import ContextOverflow
from term2acp.turns import compaction
from term2acp.turns import context as c
from tests.unit.turns.test_context import Session, Summarizer, exchange


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
