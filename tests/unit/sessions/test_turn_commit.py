"""The turn's commit before it asks the model does not wait for the store thread: the
batch (the user message, the touch) travels while the request goes out. A failure of
that batch still fails the turn (``LiveSession.settle`` once the model has answered), and
a batch sent without waiting is raised by the session's next waiting commit.

The store thread is held with another connection's write lock (WAL: it waits in SQLite's
busy handler, off the hub): the turn must reach the model meanwhile."""

import re
import sqlite3

import gevent
import pytest
from gevent.event import Event

from term2acp.agent.turn import Turn
from term2acp.providers import base as pb
from term2acp.providers.catalog import Catalog
from term2acp.sessions.errors import StoreError
from term2acp.sessions.manager import SessionManager
from term2acp.sessions.store import Store
from term2acp.settings import Settings
from tests.support.storefail import refusing_inserts

WAIT = 10  # seconds: the bound of every wait below


class HeldProvider(pb.Provider):
    """Streams one answer once ``go`` is set; ``asked`` says the request went out."""

    def __init__(self):
        self.asked, self.go = Event(), Event()

    def stream(self, request):
        self.asked.set()
        assert self.go.wait(WAIT), "the test never let the model answer"
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


def test_the_turn_asks_the_model_while_its_batch_is_still_on_the_way(manager, tmp_path):
    session = manager.new(str(tmp_path))
    provider = HeldProvider()
    holder = _hold(manager.store.path)
    try:
        running = gevent.spawn(_run, _turn(manager, session, provider), "say hello")
        assert provider.asked.wait(WAIT), "the turn waited for the store before the model"
        sent = session._sent
        assert sent is not None and not sent.done  # still waiting for the lock
        provider.go.set()
        gevent.sleep(0)  # hand over; the turn settles: it waits for its batch (bounded)
        assert not running.dead
    finally:
        provider.go.set()
        holder.execute("ROLLBACK")
        holder.close()
    assert running.get(timeout=WAIT) == "end_turn"
    assert sent.done and session._sent is None  # settled
    manager.store.commit(session.id)
    assert [m["role"] for m in manager.store.load_history(session.id) if "notes" not in m] == ["user", "assistant"]


def _failing_history(path):
    return refusing_inserts(path, "history")


def test_a_failure_of_the_batch_sent_without_waiting_fails_the_turn(manager, tmp_path):
    session = manager.new(str(tmp_path))
    emitted = []
    session.sink = lambda _session, event: emitted.append(type(event).__name__)
    provider = HeldProvider()
    failing = _failing_history(manager.store.path)
    holder = _hold(manager.store.path)
    try:
        running = gevent.spawn(_run, _turn(manager, session, provider), "say hello")
        assert provider.asked.wait(WAIT), "the turn waited for the store before the model"
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        provider.go.set()
    failed = running.get(timeout=WAIT)  # the turn ends failed, as when its commit waited
    assert isinstance(failed, StoreError), failed
    assert re.search("session store commit failed.*disk is full", str(failed))
    assert "TextChunk" not in emitted  # before anything of the answer was emitted
    assert [m["role"] for m in session.history if "notes" not in m] == ["user"]
    session.commit()  # told once
    assert manager.store.load_history(session.id) == []
    failing.close()


def test_a_failure_of_the_turn_batch_comes_before_the_model_error(manager, tmp_path):
    """The model fails too: the store's failure is what the turn ends with, as when the
    commit waited before the request."""
    class Broken(HeldProvider):
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


def test_commit_without_waiting_returns_at_once_and_the_next_commit_raises(tmp_path):
    path, store = _store_with_a_session(tmp_path)
    failing = _failing_history(path)
    holder = _hold(path)
    try:
        store.append_history("s1", {"role": "user", "content": "lost"})
        with gevent.Timeout(WAIT):
            sent = store.commit("s1", wait=False)  # the batch waits for the lock, we do not
        assert sent is not None and not sent.done
        assert store.commit("s1", wait=False) is sent  # nothing new: the one on its way
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with pytest.raises(StoreError, match="disk is full"):
        store.commit("s1")  # the next waiting commit tells the session
    store.commit("s1")  # once
    store.settle(sent, "s1")
    failing.close()
    store.close()


def test_settle_raises_what_the_batch_sent_without_waiting_lost(tmp_path):
    path, store = _store_with_a_session(tmp_path)
    store.create_session("s2", "/w", None, None)
    failing = _failing_history(path)
    store.append_history("s1", {"role": "user", "content": "lost"})
    sent = store.commit("s1", wait=False)
    store.settle(None, "s2")  # another session lost nothing
    with pytest.raises(StoreError, match="disk is full"):
        store.settle(sent, "s1")
    store.settle(sent, "s1")  # told once
    with gevent.Timeout(WAIT):
        store.barrier()  # nothing pending or on its way
    failing.close()
    store.close()


def test_a_delivery_resumes_the_waiting_greenlet_at_once(tmp_path, monkeypatch):
    """A greenlet waiting cooperatively for its job (a commit; the writer's barrier once
    its native wait has run out) runs as soon as the job is delivered, inside the
    delivery, not one loop iteration later (by then a streaming turn has read and handled
    everything its socket had: ~2 ms of chunks before the first one goes out)."""
    from term2acp.sessions import store as store_module

    order = []
    deliver = store_module._Worker._deliver

    def delivering(worker, here=False):
        had = bool(worker._finished)  # a wake-up with nothing left (the thread signals
        deliver(worker, here)  # after a native wait took its job) is no delivery
        if had:
            order.append("delivered")
    monkeypatch.setattr(store_module._Worker, "_deliver", delivering)
    store = Store(str(tmp_path / "sessions.sqlite3")).open()
    store.create_session("s1", "/w", None, None)

    def writer():
        store.touch("s1")
        store.commit()
        order.append("resumed")
    gevent.idle()  # the delivery that resumed us (the commit above) ends
    order.clear()
    gevent.spawn(writer).get(timeout=WAIT)
    assert order[:2] == ["resumed", "delivered"]
    store.close()


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


# ---------------------------------------------------------------- the writer's barrier
def _bystander(ran):
    return gevent.spawn(ran.append, "bystander")


def test_the_barrier_waits_for_its_job_natively_first(tmp_path, monkeypatch):
    """A quick job is waited for with the hub paused (the store thread does not compete
    with a streaming turn for the GIL): nothing else runs while the barrier waits."""
    monkeypatch.setattr("term2acp.sessions.store.BARRIER_SPIN", WAIT)
    store = Store(str(tmp_path / "sessions.sqlite3")).open()
    try:
        store.create_session("s1", str(tmp_path), "scripted", "m")
        store.touch("s1", "a title")  # pending: the barrier must commit it
        ran = []
        glet = _bystander(ran)
        store.barrier()
        assert ran == []  # the hub did not run the bystander meanwhile
        glet.join(WAIT)
        assert ran == ["bystander"]
        assert store.get_session("s1")["title"] == "a title"
    finally:
        store.close()


def test_a_slow_job_makes_the_barrier_wait_cooperatively_after_its_bound(tmp_path, monkeypatch):
    """Another process's lock holds the job: after BARRIER_SPIN the hub runs again, and
    the barrier returns once the job has gone through."""
    monkeypatch.setattr("term2acp.sessions.store.BARRIER_SPIN", 0.01)
    path = str(tmp_path / "sessions.sqlite3")
    store = Store(path, busy_wait=30).open()
    try:
        store.create_session("s1", str(tmp_path), "scripted", "m")
        holder = _hold(path)
        store.touch("s1", "a title")
        ran = []
        barrier = gevent.spawn(store.barrier)
        glet = _bystander(ran)
        glet.join(WAIT)
        assert ran == ["bystander"] and not barrier.dead  # the hub went on meanwhile
        holder.execute("COMMIT")
        holder.close()
        barrier.get(timeout=WAIT)
        assert store.get_session("s1")["title"] == "a title"
    finally:
        store.close()


def test_in_a_sustained_stream_the_barrier_waits_cooperatively(tmp_path, monkeypatch):
    """Only the first barrier after a quiet spell pauses the hub: back to back (a stream
    of chunks), the turn keeps running while the job travels."""
    monkeypatch.setattr("term2acp.sessions.store.BARRIER_SPIN", WAIT)
    monkeypatch.setattr("term2acp.sessions.store.BARRIER_QUIET", 3600.0)
    store = Store(str(tmp_path / "sessions.sqlite3")).open()
    try:
        store.create_session("s1", str(tmp_path), "scripted", "m")
        store.touch("s1", "one")
        store.barrier()  # the first: native
        store.touch("s1", "two")
        ran = []
        glet = _bystander(ran)
        store.barrier()  # right after: cooperative
        assert ran == ["bystander"]
        glet.join(WAIT)
        assert store.get_session("s1")["title"] == "two"
    finally:
        store.close()
