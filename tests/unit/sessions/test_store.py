import sqlite3

import pytest

from term2acp.providers.catalog import Catalog
from term2acp.sessions.errors import InvalidCursor
from term2acp.sessions.manager import SessionManager
from term2acp.sessions.store import Store, decode_cursor, encode_cursor
from term2acp.settings import Settings


def test_store_open_transactions_are_committed_within_a_bound(tmp_path):
    """The writer commits before it writes; if it is stuck on a client that stopped reading,
    another process sharing the store must not wait for it."""
    settings = Settings.load(env={"TERM2ACP_HOME": str(tmp_path)})
    manager = SessionManager(settings, Catalog(settings), dict)
    store = manager.store.open()
    store.create_session("s1", str(tmp_path), None, None)
    store.touch("s1", "a title")  # opens a batch transaction, not yet committed
    other = sqlite3.connect(store.path, timeout=0, isolation_level=None)
    with pytest.raises(sqlite3.OperationalError):
        other.execute("BEGIN IMMEDIATE")  # the write lock is held
    manager._flush_timer.join(timeout=2)
    other.execute("BEGIN IMMEDIATE")
    other.execute("ROLLBACK")
    assert other.execute("SELECT title FROM sessions").fetchone() == ("a title",)
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
