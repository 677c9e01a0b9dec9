"""acp/replay.py: a journal record's updates are encoded as it is written (v1 and v2), and
a replay sends those bytes with the session id spliced in. They are the bytes the
translation and the encoder make of the record at replay, which is what replays rows
stored without them (by a store before migration 6, or records whose update depends on the
client or on other records): the same lines, in the same order, either way."""

import json
import sqlite3

from term2acp.acp.client import ClientProxy
from term2acp.acp.replay import send, v2_updates
from term2acp.acp.v1.replay import forms, v1_updates
from term2acp.rpc.peer import Peer
from term2acp.sessions import store as st
from term2acp.sessions.manager import SessionManager

DEEP = {"x": 0}
for _ in range(200):
    DEEP = {"x": DEEP}

RECORDS = [
    ("user_message", "u1", {"message_id": "u1", "content": [
        {"type": "text", "text": "h\u00e9llo \u2603 \"quoted\"\n\ttab \ud800 lone"},
        {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="},
        {"type": "resource_link", "uri": "file:///w/a.py", "name": "a.py"}]}),
    ("agent_thought", "t1", {"message_id": "t1", "text": "thinking \U0001f914"}),
    ("terminal", "terminal:term1", {"terminal_id": "term1", "command": "ls -l", "cwd": "/w",
                                    "output": "YQpiCg==", "exit": {"exit_code": 0,
                                                                   "signal": None}}),
    ("tool_call", "c1", {"call_id": "c1", "title": "Read a.py", "kind": "read",
                         "status": "completed", "raw_input": {"path": "a.py", "n": [1, 2.5]},
                         "raw_output": {"ok": True}, "name": "read_file",
                         "locations": [{"path": "/w/a.py", "line": 3}],
                         "content": [{"type": "text", "text": "x = 1\n"}]}),
    ("tool_call", "c2", {"call_id": "c2", "title": "ls -l", "kind": "execute",
                         "status": "completed", "name": "shell", "parent": "c0",
                         "content": [{"type": "terminal", "terminal_id": "term1"}]}),
    ("tool_call", "c3", {"call_id": "c3", "title": "Edit", "kind": "edit", "status": "failed",
                         "content": [{"type": "diff", "path": "/w/a.py", "oldText": "x = 1",
                                      "newText": "x = 2"}]}),
    ("plan", "plan:1", {"plan_id": "p1", "entries": [
        {"content": "do it", "priority": "high", "status": "pending"}]}),
    ("compaction", "k1", {"compaction_id": "k1", "status": "completed", "summary": "s",
                          "error": None, "text": "Compacted."}),
    ("compaction", "k2", {"compaction_id": "k2", "status": "in_progress", "summary": None,
                          "error": None, "text": None}),
    ("agent_message", "m0", {"message_id": "m0", "text": ""}),
    ("tool_call", "deep", {"call_id": "deep", "title": "t", "status": "completed",
                           "raw_input": DEEP}),
    ("agent_message", "m1", {"message_id": "m1", "text": "done \u2713"}),
]


class Session:
    id = "sess-\u00e9"

    class recorder:
        @staticmethod
        def flush():
            pass


class Manager:
    journal = SessionManager.journal  # the real one, over this store

    def __init__(self, store):
        self.store = store


def make_store(path, replay_forms):
    store = st.Store(str(path), replay_forms=replay_forms).open()
    store.create_session(Session.id, "/w", "scripted", "script")
    for kind, key, payload in RECORDS:
        store.journal_put(Session.id, kind, key, payload)
    store.commit()
    return store


def replayed(store, version, compaction=False, terminal_meta=False):
    """The bytes a replay writes, and how many of its pieces were stored lines."""
    out, manager = [], Manager(store)
    client = ClientProxy(Peer(out.append))
    if version == 2:
        translate = v2_updates(compaction)
    else:
        terminals = list(manager.journal(Session, ("terminal",)))
        translate = v1_updates(terminals, compaction, terminal_meta)
    send(manager, client, Session, version, translate)
    stored = sum(type(p) is bytes for p in store.journal_lines(
        Session.id, version, b"", b""))
    return b"".join(out), stored


def test_stored_updates_are_the_bytes_the_translation_would_send(tmp_path):
    encoded = make_store(tmp_path / "encoded.sqlite3", forms)
    translated = make_store(tmp_path / "translated.sqlite3", None)
    try:
        for version, options in ((2, {}), (2, {"compaction": True}), (1, {}),
                                 (1, {"compaction": True, "terminal_meta": True})):
            ours, runs = replayed(encoded, version, **options)
            theirs, none = replayed(translated, version, **options)
            assert ours == theirs, (version, options)
            assert runs >= 3 and none == 0  # stored lines were sent, between translated ones
            lines = ours.split(b"\n")[:-1]
            assert all(b'"sessionId":"sess-\xc3\xa9"' in line for line in lines)
            assert b'"deep"' not in ours  # too deep for the wire: left out either way
            assert b"\\ud800" not in ours and "\ufffd".encode() in ours
    finally:
        encoded.close()
        translated.close()


def test_which_records_are_stored_encoded():
    stored = {key: forms(kind, payload) for kind, key, payload in RECORDS}
    assert all(v1 and v2 for v1, v2 in (stored[k] for k in ("u1", "t1", "c1", "c3", "m1")))
    assert stored["u1"][0].count(b"\n") == 2  # v1: a chunk per block
    assert stored["c1"][0].count(b"\n") == 1  # v1: tool_call, then tool_call_update
    assert stored["c2"][0] is None and stored["c2"][1]  # v1 shows the terminal's record
    assert stored["m0"][0] is None and stored["m0"][1]  # v1 sends nothing for no text
    for key in ("terminal:term1", "plan:1", "k1", "k2"):  # the client decides, or rare
        assert stored[key] == (None, None)


def test_a_store_before_migration_6_replays_the_same_and_stores_new_records_encoded(tmp_path):
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path, isolation_level=None)
    for step in range(1, 6):
        for statement in st.MIGRATIONS[step].split(";"):
            if statement.strip():
                db.execute(statement)
    db.execute("INSERT INTO sessions (id, cwd, created_at, updated_at) VALUES (?, '/w', 'a',"
               " 'a')", (Session.id,))
    for seq, (kind, key, payload) in enumerate(RECORDS, 1):
        db.execute("INSERT INTO journal VALUES (?, ?, ?, ?, ?)",
                   (Session.id, seq, kind, key, json.dumps(payload)))
    for seq, message in enumerate([{"role": "user", "content": "q"},
                                   {"role": "assistant", "content": "a", "cost": 0.5},
                                   {"role": "compaction", "summary": "s"},
                                   {"role": "assistant", "content": "b", "cost": 0.25}], 1):
        db.execute("INSERT INTO history VALUES (?, ?, ?)", (Session.id, seq, json.dumps(message)))
    db.execute("PRAGMA user_version = 5")
    db.close()
    old = st.Store(str(path), replay_forms=forms).open()
    fresh = make_store(tmp_path / "fresh.sqlite3", forms)
    try:
        for version in (1, 2):
            ours, runs = replayed(old, version)
            assert runs == 0 and ours == replayed(fresh, version)[0]
        assert old.history_tail(Session.id, "compaction")[::2] == (3, 0.75)
        old.journal_put(Session.id, "agent_message", "m2", {"message_id": "m2", "text": "new"})
        old.commit()
        assert replayed(old, 2)[1] == 1  # the new record went out as stored
        assert replayed(old, 2)[0].endswith(fresh_line(fresh, "m2"))
    finally:
        old.close()
        fresh.close()


def fresh_line(store, key):
    store.journal_put(Session.id, "agent_message", key, {"message_id": key, "text": "new"})
    store.commit()
    return replayed(store, 2)[0].split(b"\n")[-2] + b"\n"


def test_an_imported_journal_is_stored_encoded_too(tmp_path):
    imported = st.Store(str(tmp_path / "imported.sqlite3"), replay_forms=forms).open()
    translated = make_store(tmp_path / "translated.sqlite3", None)
    try:
        imported.documents.write(Session.id, {"cwd": "/w"}, [], RECORDS, [], "2026-01-01")
        for version in (1, 2):
            ours, runs = replayed(imported, version)
            assert runs >= 3 and ours == replayed(translated, version)[0]
    finally:
        imported.close()
        translated.close()
