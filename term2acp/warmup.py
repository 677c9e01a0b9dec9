"""Start-up work off the hub: what the first session call would otherwise pay for.

Once ``initialize`` is answered, a native thread (gevent's threadpool) imports the session
layer of the negotiated face and the default provider, scans the command entry points and
opens the session store (SQLite PRAGMAs and migrations): what session calls wait for
(:meth:`Warmup.wait_sessions`). Then it loads the tools (importing the sandbox and
``sh``): what a turn waits for (:meth:`Warmup.wait`). The hub keeps serving meanwhile and
waits cooperatively.

Why wait instead of importing on the hub: under gevent's monkey-patching the interpreter's
per-module import locks are gevent locks, so two threads importing the same module at
once wait for each other across threads (two warm-up threads doing so hung once). So one
thread imports at a time: the warm-up runs in one thread; the hub imports nothing of the
session layer before the first part is done, and nothing of the second (tools, sandbox)
outside a turn, which waits for it. A module that session calls import lazily belongs in
the first part.

Every step is best effort: one that fails is left to the hub, which then does it the
ordinary way and reports the failure where it always did (a broken plug-in is logged, a
damaged store is moved aside and told on the first session call).
"""

import importlib
import logging
import sys
import time

import gevent
from gevent.event import Event

log = logging.getLogger(__name__)

SWITCH_INTERVAL = 0.002  # seconds: the GIL hand-over period while the warm-up runs (0.5 ms
# made the warm-up itself 20-30 % slower: its two threads passed the GIL back and forth)
WAIT = 30.0  # seconds the hub waits for the warm-up before doing the work itself
FACES = {1: "term2acp.acp.v1.sessions", 2: "term2acp.acp.sessions"}
SESSION_MODULES = ("term2acp.sessions.manager", "term2acp.acp.translate",
                   "term2acp.acp.permissions", "term2acp.agent.commands",
                   "term2acp.providers.http")  # the /models listing starts with a session
TURN_MODULES = ("term2acp.tools.registry", "term2acp.sandbox.bwrap")
# the default provider's module (not the local one: its engine loads on first use)
PROVIDER_MODULES = {"openai": "term2acp.providers.openai",
                    "anthropic": "term2acp.providers.anthropic",
                    "scripted": "term2acp.providers.scripted"}


class Warmup:
    def __init__(self, settings):
        self.settings = settings
        self.tools = None  # name -> Tool, loaded off the hub (None: load on the hub)
        self.store = None  # an opened Store (None: the manager opens its own)
        self._ready = self._sessions_ready = None  # Events, once scheduled
        self._modules = ()
        self.greenlet = None  # runs the warm-up, then ``then``
        self._sessions_at = None

    def schedule(self, version, catalog=None, then=None, delay=0.001):
        """Plan the warm-up (once): from now on waiters wait for it. It starts ``delay``
        seconds later (after the initialize answer has been written), runs in native
        threads, then ``then()`` runs on the hub. ``catalog`` names the default provider,
        whose module is imported too."""
        if self._ready is not None:
            return
        self._ready, self._sessions_ready = Event(), Event()
        provider = _provider_module(catalog)
        self._modules = (FACES.get(version, FACES[2]), *SESSION_MODULES) + (
            (provider,) if provider else ())
        self.greenlet = gevent.spawn_later(delay, self._run, then)
        self.greenlet.name = "warm-up"

    def wait_sessions(self, timeout=WAIT):
        """Wait cooperatively until the session layer is ready (True at once when no
        warm-up was scheduled)."""
        return _ready(self._sessions_ready, "session layer", timeout)

    def wait(self, timeout=WAIT):
        """Wait cooperatively until the whole warm-up has ended (tools and sandbox too)."""
        return _ready(self._ready, "tools and sandbox", timeout)

    def take_tools(self):
        tools, self.tools = self.tools, None
        return tools

    def take_store(self):
        store, self.store = self.store, None
        return store

    # ------------------------------------------------------------ on the hub
    def _run(self, then):
        # The thread holds the GIL while it imports; whenever the hub wakes up it waits for
        # the thread to let go, at most one switch interval (5 ms by default) each time.
        # Shorter while the warm-up runs, so a request meanwhile is not held up by it.
        interval = sys.getswitchinterval()
        sys.setswitchinterval(min(interval, SWITCH_INTERVAL))
        started = time.perf_counter()
        try:
            self._in_threads(gevent.get_hub().threadpool)
        finally:
            sys.setswitchinterval(interval)
            self._sessions_ready.set()
            self._ready.set()
        log.debug("warm-up: session layer ready after %.1f ms, all done after %.1f ms",
                  ((self._sessions_at or started) - started) * 1000,
                  (time.perf_counter() - started) * 1000)
        if then is not None:
            then()

    def _in_threads(self, pool):
        # One thread, one step after the other: opening the store in a second thread
        # saved little (a few ms of disk waits) and cost more in GIL hand-overs.
        _wait(pool.spawn(self._prepare_sessions))
        self._sessions_at = time.perf_counter()
        self._sessions_ready.set()
        _wait(pool.spawn(self._prepare_turns))

    # ------------------------------------------------------------ in the thread
    def _prepare_sessions(self):
        for name in self._modules:
            _step(f"import {name}", importlib.import_module, name)
        _step("command plug-ins", _scan_commands)
        self.store = _step("session store", _open_store, self.settings)

    def _prepare_turns(self):
        for name in TURN_MODULES:
            _step(f"import {name}", importlib.import_module, name)
        self.tools = _step("tools", _load_tools, self.settings)


def _wait(result):
    """The thread's return value (None when it failed or did not end in time)."""
    try:
        return result.get(timeout=WAIT)
    except gevent.Timeout:
        log.warning("a start-up warm-up step still runs after %.0f s; continuing without it",
                    WAIT)
    except Exception:  # noqa: BLE001 - steps catch their own errors: a thread failure
        log.warning("start-up warm-up failed", exc_info=True)
    return None


def _ready(event, what, timeout):
    if event is None or event.wait(timeout):
        return True
    log.warning("start-up warm-up (%s) not done after %.0f s; continuing without it",
                what, timeout)
    return False


def _step(what, function, *args):
    try:
        return function(*args)
    except Exception:  # noqa: BLE001 - the hub does it again and reports it there
        log.debug("warm-up step %s failed; the hub will do it", what, exc_info=True)
        return None


def _provider_module(catalog):
    """The module of the default provider (resolved on the hub: the catalog is not
    shared with the thread), or None."""
    if catalog is None:
        return None
    try:
        provider, _model = catalog.resolve(catalog.settings.provider, catalog.settings.model)
    except Exception:  # noqa: BLE001 - session/new reports it
        return None
    if provider in catalog.custom:
        kind = catalog.custom[provider].get("type", "openai")
        provider = "anthropic" if kind == "anthropic" else "openai"
    return PROVIDER_MODULES.get(provider)


def _scan_commands():
    from term2acp.agent import commands

    commands.available()  # cached: the entry-point scan happens once per process


def _load_tools(settings):
    from term2acp.tools.registry import load_tools

    return load_tools(settings)


def _open_store(settings):
    from term2acp.sessions.errors import StoreError
    from term2acp.sessions.store import Store, store_path

    store = Store(store_path(settings))
    try:
        store.open_here()  # in this thread; a damaged file moved aside is told on first use
    except StoreError:
        return None  # the manager opens it on first use and reports the error there
    return store
