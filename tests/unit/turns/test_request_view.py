"""turns/request_view.py: the next request's messages, kept between rounds, are exactly what
building them from the whole history gives, however the history grows or is replaced."""

import random

from term2acp.turns import image_budget, request_view
from term2acp.turns.context import model_messages
from tests.support.turnsession import TurnSessionStub


class Session(TurnSessionStub):
    def __init__(self, history):
        super().__init__()
        self.history = history


def rebuilt(history):
    return image_budget.bound(model_messages(history))


def message(rng, n):
    kind = rng.choice(["user", "assistant", "tool", "image", "noted"])
    if kind == "image":
        return {"role": "user", "content": f"look {n}",
                "images": [{"data": "x" * rng.randint(1, 40)} for _ in range(rng.randint(1, 3))]}
    if kind == "noted":
        return {"role": "user", "content": f"note {n}", "notes": {rng.choice("ab"): str(n)}}
    return {"role": kind, "content": f"{kind} {n}"}


def test_kept_messages_equal_the_ones_built_from_the_whole_history():
    rng = random.Random(7)
    for start in ([], [{"role": "compaction", "summary": "earlier"}]):
        session = Session(list(start))
        for n in range(300):
            session.history.append(message(rng, n))
            if n % 97 == 96:  # a compaction or /undo: a new list
                session.history = [{"role": "compaction", "summary": f"s{n}"}] + \
                    session.history[-3:]
            if n % 5 == 0:
                sent = request_view.request_messages(session)
                assert sent == rebuilt(session.history)
                told = {}
                for m in session.history:
                    told.update(m.get("notes") or {})
                assert request_view.told(session) == told


def test_a_history_changed_in_place_is_built_again():
    session = Session([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])
    assert request_view.request_messages(session)[-1]["content"] == "b"
    session.history[-1] = {"role": "assistant", "content": "c"}  # not an append
    assert request_view.request_messages(session)[-1]["content"] == "c"
    del session.history[-1]
    assert request_view.request_messages(session) == [{"role": "user", "content": "a"}]


def test_older_images_are_left_out_past_the_count():
    session = Session([{"role": "user", "content": f"look {n}", "images": [{"data": "x"}] * 3}
                       for n in range(10)])
    sent = request_view.request_messages(session)
    assert sent == rebuilt(session.history)
    assert "images" not in sent[2] and "left out" in sent[2]["content"] and sent[9]["images"]
