"""What a turn wrote (the user message, a tool's result) is committed before it asks the
model, waiting cooperatively; a failure of that commit fails the turn before the model is
asked. The protocol writer commits what a line reports before it writes the line.

The store thread is held with another connection's write lock (WAL: it waits in SQLite's
busy handler, off the hub): the hub must run meanwhile."""

import json
import os
import re
import select
import sqlite3

import gevent
import gevent.socket
import pytest
from gevent.event import Event

from term2acp.turns.turn import Turn
from term2acp.providers import base as pb
from term2acp.providers.catalog import Catalog
from term2acp.rpc.stream import Writer
from term2acp.sessions.errors import StoreError
from term2acp.sessions.facelink import FaceLink
from term2acp.sessions.manager import SessionManager
from term2acp.sessions.store import Store
from term2acp.settings import Settings
from tests.support.storefail import refusing_inserts

WAIT = 10  # seconds: the bound of every wait below


class Provider(pb.Provider):
    """Answers "hello"; ``asked`` says the request went out."""

    def __init__(self):
        self.asked = Event()

    def stream(self, request):
        self.asked.set()
        yield pb.TextDelta("hello")
        yield pb.Stop("end_turn")


@pytest.fixture
def manager(tmp_path):
    settings = Settings.load(env={"TERM2ACP_HOME": str(tmp_path / "home")})
    store = Store(str(tmp_path / "sessions.sqlite3"), busy_wait=30)  # waits for the holder
    manager = SessionManager(settings, Catalog(settings), dict, store=store)
    yield manager
    manager.shutdown(1)


def _hold(path):
    """Another process's write transaction: the store thread's next batch waits for it."""
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    return holder


def _store_with_a_session(tmp_path):
    """An open store (waiting for a holder's lock as long as a test needs) with "s1"."""
    path = str(tmp_path / "sessions.sqlite3")
    store = Store(path, busy_wait=30).open()
    store.create_session("s1", "/w", None, None)
    return path, store


def _turn(manager, session, provider):
    return Turn(session, provider, {}, manager.settings, "sys")


def _run(turn, text):
    """``turn.run(text)`` in a greenlet of its own; a StoreError is its result."""
    try:
        return turn.run(text)
    except StoreError as exc:
        return exc


def _committed_roles(path, session_id):
    """The roles of the history another process would read now."""
    db = sqlite3.connect(path)
    try:
        rows = db.execute("SELECT message FROM history WHERE session_id = ? ORDER BY seq",
                          (session_id,)).fetchall()
    finally:
        db.close()
    return [m["role"] for m in map(json.loads, (r[0] for r in rows)) if "notes" not in m]


class CheckingProvider(pb.Provider):
    """Two rounds (a call of an unknown tool, then an answer); notes at each request what
    of the history is committed then."""

    def __init__(self, path, session_id):
        self.path, self.session_id, self.seen = path, session_id, []

    def stream(self, request):
        self.seen.append(_committed_roles(self.path, self.session_id))
        if len(self.seen) == 1:
            yield pb.ToolCall("c1", "no_such_tool", "{}")
            yield pb.Stop("tool_use")
        else:
            yield pb.TextDelta("done")
            yield pb.Stop("end_turn")


def test_what_the_turn_wrote_is_committed_before_each_model_request(manager, tmp_path):
    session = manager.new(str(tmp_path))
    provider = CheckingProvider(manager.store.path, session.id)
    assert _turn(manager, session, provider).run("say hello") == "end_turn"
    assert provider.seen == [["user"], ["user", "assistant", "tool"]]


def test_the_turn_waits_cooperatively_for_a_locked_store_before_asking(manager, tmp_path):
    session = manager.new(str(tmp_path))
    provider = Provider()
    holder = _hold(manager.store.path)
    try:
        running = gevent.spawn(_run, _turn(manager, session, provider), "say hello")
        ran = gevent.spawn(lambda: "bystander")
        assert ran.get(timeout=WAIT) == "bystander"  # the hub runs while the turn waits
        gevent.idle()
        assert not provider.asked.is_set() and not running.dead  # its commit waits
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert running.get(timeout=WAIT) == "end_turn" and provider.asked.is_set()
    assert [m["role"] for m in manager.store.load_history(session.id)
            if "notes" not in m] == ["user", "assistant"]


def test_a_failure_of_the_turn_commit_fails_the_turn_before_the_model_is_asked(manager,
                                                                               tmp_path):
    emitted = []
    session = manager.new(str(tmp_path),
                          FaceLink(lambda _session, event: emitted.append(type(event).__name__)))
    provider = Provider()
    failing = _failing_history(manager.store.path)
    failed = _run(_turn(manager, session, provider), "say hello")
    assert isinstance(failed, StoreError), failed
    assert re.search("session store commit failed.*disk is full", str(failed))
    assert not provider.asked.is_set() and "TextChunk" not in emitted
    assert [m["role"] for m in session.history if "notes" not in m] == ["user"]
    session.commit()  # told once
    assert manager.store.load_history(session.id) == []
    failing.close()


def _failing_history(path):
    return refusing_inserts(path, "history")


def test_a_failure_of_the_turn_batch_comes_before_the_model_error(manager, tmp_path):
    """The model would fail too: the store's failure is what the turn ends with."""
    class Broken(Provider):
        def stream(self, request):
            self.asked.set()
            raise pb.ProviderError("the model is down")
            yield  # a generator

    session = manager.new(str(tmp_path))
    failing = _failing_history(manager.store.path)
    with pytest.raises(StoreError, match="disk is full"):
        _turn(manager, session, Broken()).run("say hello")
    failing.execute("DROP TRIGGER no_room")
    failing.close()


def test_a_waiter_killed_before_the_delivery_is_left_out(tmp_path):
    path, store = _store_with_a_session(tmp_path)
    holder = _hold(path)
    try:
        store.touch("s1", "a title")
        waiting = gevent.spawn(store.commit, "s1")
        gevent.idle()
        assert not waiting.dead  # its job waits for the lock
        waiting.kill(block=True, timeout=WAIT)
        assert waiting.dead
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    store.commit("s1")  # the same job: delivered, nobody switched to the dead greenlet
    assert store.get_session("s1")["title"] == "a title"
    store.close()


def test_the_writer_holds_a_line_until_what_it_reports_is_committed(tmp_path):
    """Another process holds the write lock: the line waits (the hub runs meanwhile) and
    goes out once what it reports is committed."""
    path, store = _store_with_a_session(tmp_path)
    read_end, write_end = os.pipe()
    writer = Writer(write_end, before_write=store.commit_quietly)
    holder = _hold(path)
    try:
        store.touch("s1", "a title")
        writer.put(b'{"title": "a title"}\n')
        assert gevent.spawn(lambda: "bystander").get(timeout=WAIT) == "bystander"
        gevent.idle()
        assert select.select([read_end], [], [], 0)[0] == []  # not written yet
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    try:
        gevent.socket.wait_read(read_end, timeout=WAIT)
        assert os.read(read_end, 1000) == b'{"title": "a title"}\n'
        other = sqlite3.connect(path)
        assert other.execute("SELECT title FROM sessions").fetchone() == ("a title",)
        other.close()
    finally:
        writer.drain(5)
        writer.close()
        os.close(read_end)
        store.close()
