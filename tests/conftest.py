"""Shared fixtures. Helpers live in term2acp.testing and tests/support, not here."""

import os
import sys

import gevent
import pytest
from gevent import monkey


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def pytest_configure(config):
    if not config.pluginmanager.hasplugin("term2acp"):  # a checkout that was not pip-installed
        config.pluginmanager.import_plugin("term2acp.testing.plugin")
    if not monkey.is_module_patched("socket"):
        raise pytest.UsageError("run the tests under gevent: python -m gevent.monkey --module pytest")


@pytest.fixture(autouse=True)
def _no_leaked_greenlets():
    """No greenlet a test spawned may outlive it (gevent's leakcheck idea)."""
    import gc

    from gevent import Greenlet

    before = {id(g) for g in gc.get_objects() if isinstance(g, Greenlet) and not g.dead}
    yield
    gevent.sleep(0)
    leaked = [g for g in gc.get_objects() if isinstance(g, Greenlet) and not g.dead
              and id(g) not in before and not getattr(g, "_t2_allowed", False)]
    for g in leaked:
        g.kill(block=False)
    assert not leaked, f"greenlets outlived the test: {leaked}"


@pytest.fixture
def home(tmp_path):
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def workspace(acp_workspace):
    return acp_workspace


@pytest.fixture
def agent_env(acp_env, home):
    """The kit's environment (term2acp.testing.plugin), with ``home`` as TERM2ACP_HOME."""
    return dict(acp_env, TERM2ACP_HOME=str(home))


@pytest.fixture
def spawn(acp_agent, home):
    """``spawn(*args, env=..., script=...)``: the kit's ``acp_agent`` (not initialized), with
    ``home`` as TERM2ACP_HOME; every agent is closed and schema-checked after the test."""
    def _spawn(*args, env=None, script=None):
        full = {"TERM2ACP_HOME": str(home)}
        full.update(env or {})
        return acp_agent(script=script, args=args, env=full, initialize=False)
    return _spawn


@pytest.fixture
def agent(spawn):
    a = spawn()
    a.initialize()
    return a
