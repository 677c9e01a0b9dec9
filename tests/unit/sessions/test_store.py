import os
import sqlite3

import gevent
import pytest

from term2acp.providers.catalog import Catalog
from term2acp.sessions.errors import InvalidCursor
from term2acp.sessions.facelink import FaceLink
from term2acp.sessions.manager import SessionManager
from term2acp.sessions.store import Store, decode_cursor, encode_cursor
from term2acp.settings import Settings


def test_store_no_transaction_stays_open_between_trips(tmp_path):
    """Writes wait in memory and go to the store thread as one transaction with the next
    commit: another process sharing the store is never locked out meanwhile, even when
    the writer is stuck on a client that stopped reading."""
    settings = Settings.load(env={"TERM2ACP_HOME": str(tmp_path)})
    manager = SessionManager(settings, Catalog(settings), dict)
    store = manager.store.open()
    store.create_session("s1", str(tmp_path), None, None)
    store.touch("s1", "a title")  # queued, not yet sent
    other = sqlite3.connect(store.path, timeout=0, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # the write lock is free
    other.execute("ROLLBACK")
    manager.flush()
    other.execute("BEGIN IMMEDIATE")  # and free again once committed
    other.execute("ROLLBACK")
    assert other.execute("SELECT title FROM sessions").fetchone() == ("a title",)
    other.close()
    manager.shutdown(1)


def test_store_cursors_round_trip_and_refuse_forgeries():
    assert decode_cursor(encode_cursor("2026-01-01T00:00:00.000000Z", "abc")) == \
        ("2026-01-01T00:00:00.000000Z", "abc")
    for bad in ("", "x", "W10", "WzEsMl0", encode_cursor("t", "i")[:-2]):
        with pytest.raises(InvalidCursor):
            decode_cursor(bad)


def test_store_newer_schema_is_refused(tmp_path):
    path = tmp_path / "s.sqlite3"
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 99")
    db.close()
    from term2acp.sessions.errors import StoreError

    with pytest.raises(StoreError, match="newer than this term2acp"):
        Store(str(path)).open()


@pytest.mark.parametrize("content", [b"", b"garbage, not SQLite" * 64])
def test_store_a_damaged_file_is_moved_aside_once_and_said_so(tmp_path, content):
    from term2acp.sessions.errors import StoreRecovered

    path = tmp_path / "sessions.sqlite3"
    path.write_bytes(content)
    store = Store(str(path))
    with pytest.raises(StoreRecovered) as caught:
        store.open()
    moved = list(tmp_path.glob("sessions.sqlite3.damaged-*"))
    assert len(moved) == 1 and moved[0].read_bytes() == content
    assert str(moved[0]) in str(caught.value)
    assert store.open() is store  # the fresh store works from now on
    store.create_session("s1", "/w", None, None)
    assert store.list_sessions()[0][0]["id"] == "s1"
    store.close()


def test_store_a_locked_store_is_not_taken_for_a_damaged_one(tmp_path):
    from term2acp.sessions.errors import StoreError

    path = tmp_path / "sessions.sqlite3"
    Store(str(path)).open().close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA journal_mode = DELETE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        store = Store(str(path), busy_wait=0.2)  # the lock never goes: fail sooner
        with pytest.raises(StoreError, match="locked"):
            store.open()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert not list(tmp_path.glob("*.damaged-*"))


def test_store_text_with_lone_surrogates_is_stored_replaced(tmp_path):
    store = Store(str(tmp_path / "s.sqlite3")).open()
    store.create_session("s1", "/w", "prov\udc80", None)
    store.touch("s1", "title \ud800 here")
    store.commit()
    assert store.list_sessions()[0][0]["title"] == "title \ufffd here"
    assert store.get_session("s1")["provider"] == "prov\ufffd"
    store.close()


def _manager(tmp_path, **overrides):
    settings = Settings.load(env={"TERM2ACP_HOME": str(tmp_path / "home")})
    for key, value in overrides.items():
        setattr(settings, key, value)
    return SessionManager(settings, Catalog(settings), dict)


def test_manager_a_session_new_that_fails_after_the_row_leaves_no_row(tmp_path, monkeypatch):
    manager = _manager(tmp_path)
    monkeypatch.setattr(manager, "_workdir", lambda sid: (_ for _ in ()).throw(OSError("full")))
    with pytest.raises(OSError):
        manager.new(str(tmp_path))
    assert manager.list()[0] == [] and manager.live == {}
    manager.shutdown(1)


def test_manager_caps_live_sessions(tmp_path):
    from term2acp.sessions.errors import SessionLimit

    manager = _manager(tmp_path, max_live_sessions=2, idle_session_timeout=0)
    manager.new(str(tmp_path))
    manager.new(str(tmp_path))
    with pytest.raises(SessionLimit):
        manager.new(str(tmp_path))
    assert len(manager.list()[0]) == 2
    manager.shutdown(1)


def test_manager_idle_sessions_close_and_reopen_with_their_grants(tmp_path):
    import gevent

    manager = _manager(tmp_path, idle_session_timeout=0.05)
    sink = object()
    session = manager.new(str(tmp_path), FaceLink(sink))
    session.access.allow_edit_folder("/elsewhere")
    with gevent.Timeout(5):
        while session.id in manager.live:
            gevent.sleep(0.02)
    assert session.closed and session.lock.fd is None
    again = manager.get(session.id)  # a prompt's admission reopens it
    assert again is not session and again.face.sink is sink and \
        again.access.can_edit("/elsewhere/x")
    assert manager.close(again.id)
    from term2acp.sessions.errors import SessionNotFound

    with pytest.raises(SessionNotFound):
        manager.get(session.id)  # closed by the client: never reopened
    manager.shutdown(1)


def test_manager_undo_new_on_failure_removes_what_the_front_end_created(tmp_path):
    manager = _manager(tmp_path)
    kept = manager.new(str(tmp_path))
    with pytest.raises(RuntimeError):
        with manager.undo_new_on_failure():
            manager.new(str(tmp_path))
            raise RuntimeError("e.g. an MCP server failed to start")
    assert [r["id"] for r in manager.list()[0]] == [kept.id] and list(manager.live) == [kept.id]
    manager.shutdown(1)


def test_store_waits_for_another_writer_cooperatively(tmp_path):
    """Another process's write lock must not stall the hub: other greenlets keep running
    while a write waits for it, and the write goes through once it is released."""
    import gevent

    store = Store(str(tmp_path / "s.sqlite3")).open()
    holder = sqlite3.connect(store.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    ticks = []
    ticker = gevent.spawn(lambda: [ticks.append(gevent.sleep(0.01)) for _ in range(20)])
    writer = gevent.spawn(store.create_session, "s1", "/w", None, None)
    ticker.join(timeout=5)
    assert len(ticks) == 20 and not writer.dead  # the hub ran while the write waited
    holder.execute("ROLLBACK")
    writer.join(timeout=5)
    assert writer.successful() and store.get_session("s1")["cwd"] == "/w"
    holder.close()
    store.close()


def test_store_opening_does_not_wait_for_another_process_writing(tmp_path):
    path = tmp_path / "sessions.sqlite3"
    Store(str(path)).open().close()
    holder = sqlite3.connect(str(path), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process writing: opening only reads
    try:
        with gevent.Timeout(10):  # a wait for the holder would be 30 s
            store = Store(str(path), busy_wait=30).open()
        store.close()
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_store_opening_an_existing_store_prepares_its_write_ahead_log(tmp_path):
    """The log SQLite deletes on the last close is made again while the store opens, in its
    thread, so the first session/new's commit does not create it and sync its header."""
    path = str(tmp_path / "sessions.sqlite3")
    Store(path).open().close()
    assert not os.path.exists(path + "-wal")  # the last close removed it
    store = Store(path).open()
    try:
        assert os.path.getsize(path + "-wal") > 0
    finally:
        store.close()
