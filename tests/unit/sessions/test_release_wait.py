"""A lookup of a session whose idle close is under way waits for that close to end
(tests/e2e/test_idle_release.py: then reopens it); when the close fails it fails closed
instead of reopening a session whose last changes were not stored.

The close's commit is held with another connection's write lock, then refused by a trigger
(as a full disk would)."""

import sqlite3

import gevent

from term2acp.providers.catalog import Catalog
from term2acp.sessions.errors import SessionClosing
from term2acp.sessions.manager import SessionManager
from term2acp.sessions.store import Store
from term2acp.settings import Settings
from tests.support.storefail import refusing_inserts

WAIT = 10  # seconds: the bound of every wait below


def test_a_lookup_during_a_failing_idle_close_fails_closed(tmp_path):
    settings = Settings.load(env={"TERM2ACP_HOME": str(tmp_path / "home")})
    settings.max_live_sessions = 1
    path = str(tmp_path / "sessions.sqlite3")
    manager = SessionManager(settings, Catalog(settings), dict, store=Store(path, busy_wait=30))
    cwd = tmp_path / "w"
    cwd.mkdir()
    refusing = holder = None
    try:
        first = manager.new(str(cwd))
        manager.store.commit()
        settings.idle_session_timeout = 1e-6  # from now on ``first`` counts as idle
        manager.store.journal_put(first.id, "note", "k1", {"text": "x"})  # its close commits it
        refusing = refusing_inserts(path, "journal")
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # the close's commit waits for this
        opening = gevent.spawn(manager.new, str(cwd))  # at the cap: idle-closes ``first``
        lookup = gevent.spawn(manager.get, first.id)  # arrives while that close commits
        gevent.idle()  # both ran until they wait
        assert not lookup.ready()  # waits for the close (not "Session not found")
        holder.execute("ROLLBACK")  # the commit goes on, and the trigger refuses it
        assert gevent.joinall([opening, lookup], timeout=WAIT) and lookup.ready()
        assert isinstance(lookup.exception, SessionClosing), lookup.value
        assert first.id not in manager.live
    finally:
        for db in (holder, refusing):
            if db is not None:
                db.close()
        manager.shutdown(1)
