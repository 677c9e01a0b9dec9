"""Shared fixtures. Helpers live in term2acp.testing and tests/support, not here."""

import os
import sys
import threading
import time
import weakref

import gevent
import pytest
from gevent import monkey


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

# pytest keeps its assertion-rewritten test modules as .pyc files, unless writing bytecode
# is off (PYTHONDONTWRITEBYTECODE, set in some shells and CI images): then each worker
# rewrote and compiled every test module on every run, ~3 s of each worker's start. The
# test processes write them anyway (as _compile_sources writes the package's); the agents
# they spawn keep the caller's setting.
sys.dont_write_bytecode = False


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """The whole suite (no paths given, so ``testpaths``) runs in parallel through
    pytest-xdist, one worker per core, long tests balanced by work stealing; a run of
    chosen paths stays in one process. ``-n N`` (``-n 0``: none) or ``-p no:xdist`` decide
    otherwise. Workers start under gevent (term2acp/testing/xdist_worker.py)."""
    if (config.pluginmanager.hasplugin("xdist") and config.option.numprocesses is None
            and not hasattr(config, "workerinput")
            and config.args_source == pytest.Config.ArgsSource.TESTPATHS):
        config.option.numprocesses = "auto"
        if config.option.dist == "no":
            config.option.dist = "worksteal"


def pytest_configure(config):
    if not config.pluginmanager.hasplugin("term2acp"):  # a checkout that was not pip-installed
        config.pluginmanager.import_plugin("term2acp.testing.plugin")
    if not monkey.is_module_patched("socket"):
        raise pytest.UsageError("run the tests under gevent: python -m gevent.monkey --module pytest")
    if not hasattr(config, "workerinput"):  # once per run, before any xdist worker starts
        _compile_sources()
    _track_spawned_greenlets()


def _compile_sources():
    """Byte-compile the code that spawned processes import (dozens of agents): with
    PYTHONDONTWRITEBYTECODE set, as here and maybe in CI, a fresh clone has no .pyc files
    and every agent would compile term2acp from source. compileall writes them anyway and
    skips the up-to-date ones."""
    import compileall

    for package in ("term2acp", os.path.join("tests", "support")):
        compileall.compile_dir(os.path.join(ROOT, package), quiet=2, workers=1)


# ---------------------------------------------------------------- greenlet leak check
_SPAWNED = weakref.WeakSet()  # greenlets created since the current test started
LEAK_GRACE = 2.0  # seconds a test's greenlets get to end after it before they count as leaked


_Greenlet = gevent.Greenlet


class _TrackedGreenlet(_Greenlet):
    """gevent's Greenlet, remembered where it is created (no heap scan per test)."""

    def __init__(self, *args, **kwargs):
        _Greenlet.__init__(self, *args, **kwargs)
        _SPAWNED.add(self)


def _track_spawned_greenlets():
    """Route every spawn path the code and gevent's helpers use through the tracked class:
    ``gevent.spawn``/``spawn_later``, ``Greenlet(...)`` looked up through ``gevent``,
    ``Group``/``Pool.spawn``, ``StreamServer``'s default spawn, and the modules that keep
    their own reference: patched threads (``gevent.thread``), ``gevent.subprocess``'s pipe
    readers and the thread pool's manager."""
    import gevent.baseserver
    import gevent.greenlet
    import gevent.pool
    import gevent.subprocess
    import gevent.thread
    import gevent.threadpool

    if gevent.Greenlet is _TrackedGreenlet:
        return
    gevent.Greenlet = gevent.greenlet.Greenlet = _TrackedGreenlet
    gevent.spawn = gevent.subprocess.spawn = _TrackedGreenlet.spawn
    gevent.spawn_later = _TrackedGreenlet.spawn_later
    gevent.pool.Group.greenlet_class = _TrackedGreenlet
    gevent.baseserver.BaseServer._spawn = _TrackedGreenlet.spawn
    for module in (gevent.thread, gevent.subprocess, gevent.threadpool):
        module.Greenlet = _TrackedGreenlet


@pytest.fixture(autouse=True)
def _no_leaked_greenlets():
    """No greenlet a test spawned may outlive it (gevent's leakcheck idea)."""
    _SPAWNED.clear()
    yield
    gevent.sleep(0)
    kept = _keeper_greenlets()
    leaked = [g for g in list(_SPAWNED)
              if not g.dead and not getattr(g, "_t2_allowed", False) and id(g) not in kept]
    if leaked:  # what is winding down (sh's threads of a process killed at the end, which
        # wake on a timer) may finish; a leak is what still runs after LEAK_GRACE
        gevent.joinall(leaked, timeout=LEAK_GRACE)
        leaked = [g for g in leaked if not g.dead]
    _SPAWNED.clear()
    for g in leaked:
        g.kill(block=False)
    assert not leaked, f"greenlets outlived the test: {leaked}"


# ---------------------------------------------------------------- thread and fd leak check
LEAK_WAIT = 5.0  # seconds for what a test started to end after it (reaped, closed)


def _threads():
    """Native threads of this process, but gevent's thread pool's workers (they idle on)."""
    pool = getattr(gevent.get_hub(), "_threadpool", None)
    return len(os.listdir("/proc/self/task")) - (pool.size if pool is not None else 0)


def _fds():
    found = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            found.add((int(name), os.readlink(f"/proc/self/fd/{name}")))
        except OSError:
            pass  # the listing's own descriptor, already closed
    return found


def _keeper():
    """The MCP keeper's process (one per process, made on first use: mcp/keeper.py)."""
    from term2acp.mcp import keeper

    made = keeper._keeper
    return made[1] if made and made[0] == os.getpid() and made[1].running else None


def _keeper_greenlets():
    """The ids of the greenlets that watch the MCP keeper's process, which lasts as long as
    the process that made it: process.py's and sh's (a patched thread)."""
    keeper = _keeper()
    if keeper is None:
        return set()
    threads = {t.ident for t in threading.enumerate() if t.name.endswith(f" pid {keeper.pid}")}
    return threads | {id(g) for g in list(_SPAWNED) if g.name == f"process-{keeper.pid}"}


def _watching(pid):
    """The pidfd this process watches ``pid`` by (sandbox/process.py), if any."""
    for name in os.listdir("/proc/self/fdinfo"):
        try:
            with open(f"/proc/self/fdinfo/{name}") as fh:
                if f"Pid:\t{pid}\n" in fh.read():
                    return int(name)
        except OSError:
            pass
    return None


def _singletons():
    """Descriptors the agent keeps for the life of its process, made on first use: the
    MCP keeper's pipe and the pidfd of its watch (one keeper per process,
    mcp/keeper.py) and the sandbox's lifeline (both ends, sandbox/bwrap.py)."""
    from term2acp.sandbox import bwrap

    keeper = _keeper()
    fds = ([keeper.input, _watching(keeper.pid)] if keeper else []) + \
        [fd for ends in bwrap._lifeline for fd in ends[:2]]
    out = set()
    for fd in fds:
        try:
            out.add((fd, os.readlink(f"/proc/self/fd/{fd}")))
        except OSError:  # closed: then it is not there to be told apart either
            pass
    return out


@pytest.fixture(autouse=True)
def _no_leaked_threads_or_fds():
    """What a test's agents served in this process started (the store's thread, sockets,
    SQLite files, sandboxes' pipes and namespaces) ends with them: no native thread and no
    descriptor outlives a test that served one (bounded wait). Set up before, and so torn
    down after, every other fixture of the test."""
    from term2acp.testing import inprocess

    threads, fds, served = _threads(), _fds(), inprocess.served()
    yield
    if inprocess.served() == served:
        return  # a process's agents end with their process
    deadline = time.monotonic() + LEAK_WAIT
    while True:
        extra_threads, extra_fds = _threads() - threads, _fds() - fds - _singletons()
        if (extra_threads <= 0 and not extra_fds) or time.monotonic() > deadline:
            break
        gevent.sleep(0.02)
    assert extra_threads <= 0 and not extra_fds, (
        f"outlived the test: {max(0, extra_threads)} threads, descriptors {sorted(extra_fds)}")


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
    """``spawn(*args, env=..., script=..., process=None)``: the kit's ``acp_agent`` (not
    initialized), with ``home`` as TERM2ACP_HOME (``process=True``: a process of its own);
    every agent is closed and schema-checked after the test."""
    def _spawn(*args, env=None, script=None, process=None):
        full = {"TERM2ACP_HOME": str(home)}
        full.update(env or {})
        return acp_agent(script=script, args=args, env=full, initialize=False, process=process)
    return _spawn


@pytest.fixture
def agent(spawn):
    a = spawn()
    a.initialize()
    return a
