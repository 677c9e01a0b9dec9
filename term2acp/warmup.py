"""Start-up work off the hub: what the first session call would otherwise pay for.

Once ``initialize`` is answered, a native thread (gevent's threadpool) does three steps,
each what some calls wait for (cooperatively; the hub keeps serving meanwhile):

1. the session layer of the negotiated face (handlers, manager, store, schemas), and
   opens the session store (SQLite PRAGMAs and migrations): what the face needs to be
   built and ``session/new`` to run (:meth:`Warmup.wait_sessions`; then ``on_sessions``
   runs on the hub);
2. the turn layer (the turn loop, compaction, prompt content, instructions, MCP), the
   providers' HTTP client and the default provider's module, and the command entry
   points: what prompts, resume and load wait for, and what a new session's commands
   update and /models listing wait for, after its answer (:meth:`Warmup.wait_turns`);
3. the tools (importing the sandbox and ``sh``): what a turn waits for
   (:meth:`Warmup.wait`).

Why wait instead of importing on the hub: under gevent's monkey-patching the interpreter's
per-module import locks are gevent locks, so two threads importing the same module at
once wait for each other across threads (two warm-up threads doing so hung once). So one
thread imports at a time: the warm-up runs in one thread; the hub imports nothing of the
session layer before the first step is done, nothing of the turn layer before the second
(the calls that import it wait), and nothing of the third (tools, sandbox) outside a turn,
which waits for it. A module that session/new imports lazily belongs in the first step;
one that only prompts, resume or load import, in the second.

Every step is best effort: one that fails is left to the hub, which then does it the
ordinary way and reports the failure where it always did (a broken plug-in is logged, a
damaged store is moved aside and told on the first session call).
"""

import importlib
import logging
import time

import gevent
from gevent.event import Event

from term2acp.core.pacing import restore_switch_interval, shorten_switch_interval

log = logging.getLogger(__name__)

SWITCH_INTERVAL = 0.002  # seconds: the GIL hand-over period while the warm-up runs (0.5 ms
# made the warm-up itself 20-30 % slower: its two threads passed the GIL back and forth)
WAIT = 30.0  # seconds the hub waits for the warm-up before doing the work itself
FACES = {1: "term2acp.acp.v1.sessions", 2: "term2acp.acp.sessions"}
FACE_ROUTES = {1: ("term2acp.acp.v1.routes",), 2: ()}  # v2's schemas load at start-up
SESSION_MODULES = ("term2acp.sessions.manager", "term2acp.agent.commands")
# step 2 also imports providers.http (the /models listing a session starts waits for it)
# and the default provider's module, and scans the command plug-ins
TURN_LAYER = ("term2acp.agent.turn", "term2acp.agent.context", "term2acp.agent.content",
              "term2acp.agent.instructions", "term2acp.agent.prompt",
              "term2acp.agent.failures", "term2acp.mcp.session", "term2acp.providers.http")
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
        self._ready = self._sessions_ready = self._turns_ready = None  # Events, once scheduled
        self._modules = self._turn_modules = ()
        self.greenlet = None  # runs the warm-up, then ``then``
        self._sessions_at = None
        self._on_sessions = None

    def schedule(self, version, catalog=None, then=None, delay=0.001, on_sessions=None):
        """Plan the warm-up (once): from now on waiters wait for it. It starts ``delay``
        seconds later (after the initialize answer has been written), runs in native
        threads; ``on_sessions()`` runs on the hub once the session layer is in, ``then()``
        at the end. ``catalog`` names the default provider, whose module is imported too."""
        if self._ready is not None:
            return
        self._ready, self._sessions_ready, self._turns_ready = Event(), Event(), Event()
        provider = _provider_module(catalog)
        face = version if version in FACES else 2
        self._modules = (FACES[face], *FACE_ROUTES[face], *SESSION_MODULES)
        self._turn_modules = TURN_LAYER + ((provider,) if provider else ())
        self._on_sessions = on_sessions
        self.greenlet = gevent.spawn_later(delay, self._run, then)
        self.greenlet.name = "warm-up"

    def wait_sessions(self, timeout=WAIT):
        """Wait cooperatively until the session layer is ready (True at once when no
        warm-up was scheduled)."""
        return _ready(self._sessions_ready, "session layer", timeout)

    def wait_turns(self, timeout=WAIT):
        """Wait cooperatively until the turn layer is imported too."""
        return _ready(self._turns_ready, "turn layer", timeout)

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
        shorten_switch_interval(SWITCH_INTERVAL)
        started = time.perf_counter()
        try:
            self._in_threads(gevent.get_hub().threadpool)
        finally:
            restore_switch_interval(SWITCH_INTERVAL)
            self._sessions_ready.set()
            self._turns_ready.set()
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
        if self._on_sessions is not None:  # on the hub, before the next step holds the GIL
            _step("session layer (hub)", self._on_sessions)
        _wait(pool.spawn(self._import_turn_layer))
        self._turns_ready.set()
        _wait(pool.spawn(self._prepare_turns))

    # ------------------------------------------------------------ in the thread
    def _prepare_sessions(self):
        for name in self._modules:
            _step(f"import {name}", importlib.import_module, name)
        self.store = _step("session store", _open_store, self.settings)

    def _import_turn_layer(self):
        for name in self._turn_modules:
            _step(f"import {name}", importlib.import_module, name)
        _step("command plug-ins", _scan_commands)

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
    from term2acp.sessions.store import store_for

    store = store_for(settings)
    try:
        store.open_here()  # in this thread; a damaged file moved aside is told on first use
    except StoreError:
        return None  # the manager opens it on first use and reports the error there
    return store
