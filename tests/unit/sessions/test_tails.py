"""sessions/store/tails.py: a resumed session reads its history from the last compaction
marker (the whole history's cost summed in SQLite), the records a killed process left open,
and the replay journal a page at a time, in order."""

import pytest

from term2acp.sessions.store import Store, tails


@pytest.fixture
def store(tmp_path):
    store = Store(str(tmp_path / "sessions.sqlite3")).open()
    store.create_session("s", "/w", "scripted", "script")
    yield store
    store.close()


def test_the_history_tail_starts_at_the_last_marker_and_the_cost_counts_everything(store):
    messages = [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1",
                                                     "cost": 0.5},
                {"role": "compaction", "summary": "s1"}, {"role": "user", "content": "q2"},
                {"role": "assistant", "content": "a2", "cost": 0.25},
                {"role": "compaction", "summary": "s2"},
                {"role": "assistant", "content": "a3", "cost": "not a number"},
                ["not", "a", "message"]]
    for message in messages:
        store.append_history("s", message)
    store.commit()
    start, tail, cost = store.history_tail("s", "compaction")
    assert start == 6 and tail == messages[5:] and cost == 0.75
    store.replace_tail("s", start, tail[:1] + [{"role": "user", "content": "q3"}])
    assert store.load_history("s") == messages[:6] + [{"role": "user", "content": "q3"}]
    assert store.history_tail("s", "nothing")[:2] == (1, store.load_history("s"))


def test_only_records_left_open_are_read_for_repair(store):
    for key, status in (("c1", "completed"), ("c2", "in_progress"), ("c3", None),
                        ("c4", "failed"), ("c5", "pending")):
        payload = {"call_id": key, "content": [{"type": "text", "text": '"status": "completed"'}]}
        store.journal_put("s", "tool_call", key, dict(payload, **({"status": status} if status
                                                                  else {})))
    store.journal_put("s", "terminal", "terminal:t1", {"terminal_id": "t1", "exit": None})
    store.journal_put("s", "terminal", "terminal:t2", {"terminal_id": "t2",
                                                       "exit": {"exit_code": 0}})
    store.journal_put("s", "agent_message", "m1", {"message_id": "m1", "text": "hi"})
    store.commit()
    found = store.journal_open("s")
    assert [p.get("call_id") or p["terminal_id"] for _, p in found] == ["c2", "c3", "c5", "t1"]


def test_the_journal_is_read_in_pages_in_order(store, monkeypatch):
    monkeypatch.setattr(tails, "FIRST_PAGE", 3)
    monkeypatch.setattr(tails, "PAGE", 5)
    for n in range(23):
        kind = "terminal" if n % 4 == 0 else "agent_message"
        store.journal_put("s", kind, f"k{n}", {"n": n})
    store.commit()
    pages = store.journal_pages("s")
    assert next(pages) == ("terminal", {"n": 0})  # the first page is read, not the rest
    assert [p["n"] for _, p in pages] == list(range(1, 23))
    assert [p["n"] for _, p in store.journal_pages("s", ("terminal",))] == list(range(0, 23, 4))
    assert store.journal("s") == [(k, p) for k, p in store.journal_pages("s")]


def test_a_record_nesting_deeper_than_the_wire_allows_comes_without_its_payload(store):
    deep = "x"
    for _ in range(70):
        deep = {"d": deep}
    wide = {"items": [{"a": [1]} for _ in range(100)]}  # many brackets, shallow
    store.journal_put("s", "agent_message", "m1", {"message_id": "m1", "text": "hi"})
    store.journal_put("s", "tool_call", "c1", {"call_id": "c1", "raw_input": deep})
    store.journal_put("s", "tool_call", "c2", {"call_id": "c2", "raw_input": wide})
    store.commit()
    assert store.journal("s") == [("agent_message", {"message_id": "m1", "text": "hi"}),
                                  ("tool_call", None),
                                  ("tool_call", {"call_id": "c2", "raw_input": wide})]
