"""The recording of files as first touched, on a real store: each path once, before any
change; credential files named, never copied; what a search found; the session's cap."""

import json
import os
import sqlite3

import pytest

from term2acp.core import events as ev
from term2acp.sessions import recording as rec
from term2acp.sessions.store import Store


@pytest.fixture
def store(tmp_path):
    store = Store(str(tmp_path / "sessions.sqlite3")).open()
    store.create_session("s1", str(tmp_path), None, None)
    yield store
    store.close()


def files(store):
    store.commit()
    db = sqlite3.connect(store.path)
    rows = db.execute("SELECT payload, content FROM recording WHERE session_id = 's1' AND"
                      " kind = 'file' ORDER BY seq").fetchall()
    db.close()
    return {json.loads(p)["path"]: (json.loads(p)["state"], c) for p, c in rows}


def report(call_id, status, locations=None, text=None):
    content = [{"type": "text", "text": text}] if text is not None else None
    return ev.ToolCallReported(call_id, status=status, locations=locations, content=content)


def test_each_path_once_as_first_seen(store, tmp_path):
    work = tmp_path / "w"
    (work / "src").mkdir(parents=True)
    (work / "a.txt").write_text("before\n")
    (work / ".env").write_text("API_KEY=sk-live-1234567890\n")
    recording = rec.Recording(store, "s1", str(work))
    recording.observe("t1", report("c1", "pending", [{"path": str(work / "a.txt")},
                                                     {"path": str(work / "new.txt")},
                                                     {"path": str(work / ".env")},
                                                     {"path": str(tmp_path / "outside")}]))
    (work / "a.txt").write_text("after\n")
    recording.observe("t1", report("c2", "pending", [{"path": str(work / "a.txt")}]))
    store.commit()
    got = files(store)
    assert got["a.txt"] == ("file", b"before\n") and got["new.txt"] == ("absent", None)
    assert got[".env"] == ("unrecorded", None)  # named, never copied
    assert set(got) == {"a.txt", "new.txt", ".env"}  # nothing outside the root
    again = rec.Recording(store, "s1", str(work))  # a resumed session: known paths stay
    again.observe("t2", report("c3", "pending", [{"path": str(work / "a.txt")}]))
    store.commit()
    assert files(store)["a.txt"] == ("file", b"before\n")


def test_files_a_search_found_and_the_session_cap(store, tmp_path, monkeypatch):
    work = tmp_path / "w"
    (work / "src").mkdir(parents=True)
    (work / "src" / "a.py").write_text("needle\n")
    (work / "src" / "b.py").write_text("x" * 100)
    (work / "c.txt").write_text("needle\n")
    monkeypatch.setattr(rec, "MAX_SESSION_BYTES", 20)
    recording = rec.Recording(store, "s1", str(work))
    recording.observe("t1", report("g", "pending", [{"path": str(work / "src")}]))
    recording.observe("t1", report("g", "completed", [{"path": str(work / "src")}],
                                   "a.py:1: needle\nb.py  (100 bytes)\nno such thing\n"))
    recording.observe("t1", report("h", "pending", [{"path": str(work)}]))
    recording.observe("t1", report("h", "completed", None, "c.txt:1: needle\n"))
    store.commit()
    got = files(store)
    assert got["src/a.py"] == ("file", b"needle\n") and got["c.txt"] == ("file", b"needle\n")
    assert got["src/b.py"] == ("unrecorded", None)  # past the session's cap
    assert got["src"][0] == "dir"
