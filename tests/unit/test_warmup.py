"""term2acp/warmup.py: the start-up work done in native threads, handed to the hub."""

import sys

import gevent
import pytest
from gevent.event import Event

from term2acp.sessions.errors import StoreRecovered
from term2acp.settings import Settings
from term2acp.warmup import Warmup


def _warmed(tmp_path, version=2):
    settings = Settings(data_dir=str(tmp_path / "data"))
    warmup = Warmup(settings)
    after = []
    assert warmup.wait(timeout=0) is True  # nothing scheduled: nothing to wait for
    warmup.schedule(version, then=lambda: after.append("then"))
    assert warmup.wait(timeout=30) is True
    warmup.greenlet.join(timeout=30)
    assert after == ["then"]
    return warmup


def test_the_warm_up_opens_the_store_and_loads_the_tools_off_the_hub(tmp_path):
    warmup = _warmed(tmp_path)
    store = warmup.take_store()
    assert store is not None and store.is_open and warmup.take_store() is None
    assert store.list_sessions()[0] == []
    store.close()
    tools = warmup.take_tools()
    assert {"read_file", "grep"} <= set(tools) and warmup.take_tools() is None


def test_a_damaged_store_moved_aside_by_the_warm_up_is_told_on_first_use(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "sessions.sqlite3").write_bytes(b"")
    store = _warmed(tmp_path, version=1).take_store()
    with pytest.raises(StoreRecovered, match="damaged-"):
        store.open()
    assert store.open() is store  # told once; the fresh store works
    store.close()


def test_the_turn_layer_waits_for_the_session_calls_in_flight(tmp_path, monkeypatch):
    """The import after the face is built holds the GIL for tens of ms: it starts once the
    session call in flight (the editor's first session/new) has ended."""
    order, requests, looks = [], [], [0]
    release = Event()

    def request():  # a session/new being handled when the face is built
        release.wait(10)
        order.append("request done")
        requests.clear()

    def in_flight():
        looks[0] += 1
        if looks[0] == 3:  # the warm-up has looked a few times: let the request end
            release.set()
        return list(requests)

    def on_sessions():
        order.append("face built")
        requests.append(gevent.spawn(request))

    real = Warmup._import_turn_layer
    monkeypatch.setattr(Warmup, "_import_turn_layer",
                        lambda self: (order.append("turn layer"), real(self)))
    # nor is the hub's thread pool made at start-up (on first use it imports
    # gevent.threadpool and concurrent.futures on the hub): the warm-up has its own thread
    hub_type, pool = type(gevent.get_hub()), type(gevent.get_hub()).threadpool
    monkeypatch.setattr(hub_type, "threadpool", property(
        lambda hub: (order.append("thread pool"), pool.fget(hub))[1], pool.fset))
    warmup = Warmup(Settings(data_dir=str(tmp_path / "data")), in_flight=in_flight)
    warmup.schedule(2, on_sessions=on_sessions)
    assert warmup.wait(timeout=30) is True
    assert order[:2] == ["face built", "request done"]
    assert "turn layer" in order and "thread pool" not in order
    assert looks[0] >= 3
    warmup.take_store().close()


def test_a_call_waiting_for_the_turn_layer_does_not_hold_it_back(tmp_path, monkeypatch):
    """A prompt in flight waits for the turn layer: it must not count as a call to let end
    first (else the first prompt would wait for the settle bound)."""
    monkeypatch.setattr("term2acp.warmup.SETTLE", 60.0)
    requests = []
    warmup = Warmup(Settings(data_dir=str(tmp_path / "data")),
                    in_flight=lambda: [glet for glet in requests if not glet.dead])
    warmup.schedule(2)
    prompt = gevent.spawn(lambda: warmup.wait_turns(timeout=20))
    requests.append(prompt)
    assert prompt.get(timeout=30) is True  # not after the 60 s bound
    assert warmup.wait(timeout=30) is True
    warmup.take_store().close()


def test_start_imports_the_session_layer_and_opens_the_store_before_any_line(tmp_path):
    warmup = Warmup(Settings(data_dir=str(tmp_path / "data")))
    warmup.start()
    assert {"term2acp.sessions.manager", "term2acp.acp.v2.handlers",
            "term2acp.acp.v1.handlers"} <= set(sys.modules)
    warmup.schedule(1)
    assert warmup.wait_sessions(timeout=30) is True
    store = warmup.take_store()
    assert store is not None and store.is_open
    store.close()
    assert warmup.wait(timeout=30) is True


def test_a_call_that_waited_for_the_store_still_holds_back_the_turn_layer(tmp_path, monkeypatch):
    """The editor's session/new read before the face was built waits for the store (not
    for the turn layer): once the store is open it is an ordinary call in flight, which
    the turn layer's import lets end first."""
    order, requests, looks = [], [], [0]
    release = Event()

    def session_new():
        assert warmup.wait_sessions(timeout=10)
        assert release.wait(10)
        order.append("handled")

    def in_flight():
        looks[0] += 1
        if looks[0] == 3:
            release.set()
        return [glet for glet in requests if not glet.dead]

    real = Warmup._import_turn_layer
    monkeypatch.setattr(Warmup, "_import_turn_layer",
                        lambda self: (order.append("turn layer"), real(self)))
    warmup = Warmup(Settings(data_dir=str(tmp_path / "data")), in_flight=in_flight)
    warmup.schedule(2)
    requests.append(gevent.spawn(session_new))
    assert warmup.wait(timeout=30) is True
    assert order == ["handled", "turn layer"]
    warmup.take_store().close()
