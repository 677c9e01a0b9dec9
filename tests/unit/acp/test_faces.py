"""The face's routes (acp/connection.py): each face's table serves exactly the methods
acp/methods.py names for it, and one read before the session store is open never holds up
the reader (the lookup runs in the reader; the wait for the session store happens in the
request's own greenlet)."""

import gevent
import pytest
from gevent.event import Event

from term2acp.acp import connection, methods
from term2acp.acp.v2.routes import routes as v2_routes
from term2acp.acp.v1.routes import routes as v1_routes
from term2acp.providers.catalog import Catalog
from term2acp.sessions.manager import SessionManager
from term2acp.settings import Settings

INIT = {2: {"protocolVersion": 2, "info": {"name": "t", "version": "1"}},
        1: {"protocolVersion": 1, "clientCapabilities": {}}}


class AnyFace:
    """Stands for a face's handlers: every attribute is a distinct callable."""

    def __getattr__(self, name):
        return lambda params: name


def test_face_tables_serve_exactly_the_named_methods():
    assert set(v2_routes(AnyFace(), connection._route)) == methods.V2_FACE
    assert set(v1_routes(AnyFace(), connection._route)) == methods.V1_FACE


class Client:
    def update(self, session_id, update, tag=None):
        pass


@pytest.mark.parametrize("version", [1, 2])
def test_a_face_method_before_the_store_is_open_waits_in_its_own_greenlet(tmp_path, version):
    settings = Settings.load(env={"TERM2ACP_HOME": str(tmp_path / "home"),
                                  "TERM2ACP_CONFIG": str(tmp_path / "none.toml")})
    manager = SessionManager(settings, Catalog(settings), dict)
    warm = Event()  # the session store, still opening
    acp = connection.Connection(manager, Client(), settings, Catalog(settings),
                                sessions_ready=lambda: warm.wait(10))
    acp.initialize(acp.routes[methods.INITIALIZE].load(INIT[version]))
    try:
        with gevent.Timeout(1):  # the reader's lookups return at once
            pending = acp.lookup(methods.SESSION_LIST)
            assert acp.lookup("$/term2/unknown") is None
        assert pending is not None and not pending.inline
        served = gevent.spawn(pending.handler, pending.load({}))
        gevent.sleep(0.01)
        assert not served.ready()  # it waits for the session layer, not the reader
        warm.set()
        assert served.get(timeout=10) == {"sessions": []}
    finally:
        manager.shutdown(1)
