"""Start-up work, arranged so that no session call waits and the hub is never blocked.

Before the reader takes its first line (``Server.run``), :meth:`Warmup.start` imports the
session layer (handlers, manager, store, their schemas; v1's face as v1 is negotiated,
:meth:`Warmup.schedule`) on the hub, where nothing else runs yet (about 10 ms: the
imports are kept lean for this, e.g. the runtime's value classes are not dataclasses,
``core/record.py``, and what only prompts use is left to the turn layer), while the
session store's own native thread opens the store (SQLite PRAGMAs and migrations, mostly
disk waits without the GIL). So the first ``session/new`` of a fresh process, sent as
soon as ``initialize`` is answered, finds its modules in and its store open (issue 16:
< 5 ms).

Once ``initialize`` is answered (:meth:`Warmup.schedule`), the rest follows, each step
what some calls wait for (cooperatively; the hub keeps serving meanwhile):

1. on the hub: waits for the store; then ``on_sessions`` builds the negotiated face (what
   :meth:`Warmup.wait_sessions` waits for); then, before a native thread of its own
   (:class:`_Thread`) takes the GIL for the next steps, lets the calls in flight end
   (bounded, :meth:`Warmup._settle`): the ``session/new`` an editor sends as soon as
   ``initialize`` is answered is served alone; then start-up's first garbage collection;
2. the turn layer (the turn loop, compaction, prompt content, instructions, MCP), the
   providers' HTTP client and the default provider's module, and the command entry
   points: what prompts, resume and load wait for, and what a new session's commands
   update and /models listing wait for, after its answer (:meth:`Warmup.wait_turns`);
3. the tools (importing the sandbox and ``sh``): what a turn waits for
   (:meth:`Warmup.wait`).

Why wait instead of importing on the hub: under gevent's monkey-patching the interpreter's
per-module import locks are gevent locks, so two threads importing the same module at
once wait for each other across threads (two warm-up threads doing so hung once). So one
thread imports at a time: the store thread imports nothing (its modules are in before it
starts); the hub imports nothing of the turn layer before the second step is done (the
calls that import it wait), and nothing of the third (tools, sandbox) outside a turn,
which waits for it. A module that session/new imports lazily belongs in
``SESSION_LAYER``; one that only prompts, resume or load import, in the second step.

Every step is best effort: one that fails is left to the hub, which then does it the
ordinary way and reports the failure where it always did (a broken plug-in is logged, a
damaged store is moved aside and told on the first session call).
"""

import importlib
import logging
import time

import gevent
from gevent import monkey
from gevent.event import Event

from term2acp.core.pacing import breathe, restore_switch_interval, shorten_switch_interval

log = logging.getLogger(__name__)

_start_new_thread = monkey.get_original("_thread", "start_new_thread")

SWITCH_INTERVAL = 0.002  # seconds: the GIL hand-over period while the warm-up runs (0.5 ms
# made the warm-up itself 20-30 % slower: its two threads passed the GIL back and forth)
WAIT = 30.0  # seconds the hub waits for the warm-up before doing the work itself
SETTLE = 0.25  # seconds the turn layer's import waits at most for the calls in flight
SETTLE_POLL = 0.001  # seconds between two looks at them
SETTLE_MIN = 0.003  # seconds it looks at least: a line that arrived meanwhile is read by then
# imported by start(), on the hub before the first line is read: the store, the v2 face
# (v1's is built on it) and the manager; a v1 connection imports its face's own modules
# (~2.5 ms) as initialize is handled, before the answer (schedule)
STORE_MODULE = "term2acp.sessions.store"  # with everything _open_store uses
SESSION_LAYER = ("term2acp.acp.v2.handlers", "term2acp.acp.v2.routes", "term2acp.sessions.manager")
FACE_MODULES = {1: ("term2acp.acp.v1.handlers", "term2acp.acp.v1.routes")}
# step 2 also imports providers.http (the /models listing a session starts waits for it)
# and the default provider's module, and scans the command plug-ins
TURN_LAYER = ("gevent.threadpool",  # the hub's pool (DNS, the local model) is then cheap
              "term2acp.turns.turn", "term2acp.turns.context", "term2acp.turns.content",
              "term2acp.turns.instructions", "term2acp.turns.prompt",
              "term2acp.turns.failures", "term2acp.mcp.session", "term2acp.providers.http",
              "term2acp.acp.v2.permissions", "term2acp.turns.commands",
              "difflib")  # an edit's diff (acp/v2/translate.py)
TURN_MODULES = ("term2acp.tools.registry", "term2acp.sandbox.bwrap")
# the default provider's module (not the local one: its engine loads on first use)
PROVIDER_MODULES = {"openai": "term2acp.providers.openai",
                    "anthropic": "term2acp.providers.anthropic",
                    "scripted": "term2acp.providers.scripted"}


class Warmup:
    def __init__(self, settings, in_flight=None):
        self.settings = settings
        self._in_flight = in_flight  # () -> the greenlets handling requests, or None
        self._waiters = set()  # greenlets waiting for this warm-up
        self.tools = None  # name -> Tool, loaded off the hub (None: load on the hub)
        self.store = None  # an opened Store (None: the manager opens its own)
        self._ready = self._sessions_ready = self._turns_ready = None  # Events, once scheduled
        self._store_job = None  # the greenlet opening the store, once started
        self._store_taken = False  # by the session manager (take_store)
        self._turn_modules = ()
        self.greenlet = None  # runs the warm-up, then ``then``
        self._sessions_at = None
        self._on_sessions = None

    def start(self):
        """Import the session layer here while the store's thread opens the store (once).
        Call it on the hub before anything else runs (the reader has not started); it
        yields between modules (a few ms each), so the hub is never held long."""
        if self._store_job is not None:
            return
        # the store's modules first; its own thread opens it (mostly disk waits, without
        # the GIL) while the hub imports the rest. The opener greenlet runs once, now, to
        # hand the open to that thread, then waits for it.
        _step("import the session store", importlib.import_module, STORE_MODULE)
        self._store_job = gevent.spawn(_step, "session store", _open_store, self.settings)
        self._store_job.name = "store-opener"
        gevent.sleep(0)
        for name in SESSION_LAYER:
            _step(f"import {name}", importlib.import_module, name)
            gevent.sleep(0)

    def schedule(self, version, catalog=None, then=None, delay=1e-6, on_sessions=None):
        """Plan the rest of the warm-up (once): from now on waiters wait for it. It starts
        ``delay`` seconds later (after the initialize answer has been written), runs in
        native threads; ``on_sessions()`` runs on the hub once the store is open, ``then()``
        at the end. ``catalog`` names the default provider, whose module is imported too.
        Starts (:meth:`start`) first if that was not done."""
        if self._ready is not None:
            return
        self.start()
        for name in FACE_MODULES.get(version, ()):  # on the hub: no thread imports yet
            _step(f"import {name}", importlib.import_module, name)
        self._ready, self._sessions_ready, self._turns_ready = Event(), Event(), Event()
        provider = _provider_module(catalog)
        self._turn_modules = TURN_LAYER + ((provider,) if provider else ())
        self._on_sessions = on_sessions
        self.greenlet = gevent.spawn_later(delay, self._run, then)
        self.greenlet.name = "warm-up"

    def wait_sessions(self, timeout=WAIT):
        """Wait cooperatively until the session store is open (True at once when no
        warm-up was scheduled)."""
        # not a waiter _settle lets by: once the store is open it goes on (with a face
        # method read before the face was built: the first session/new itself)
        return self._ready_for(self._sessions_ready, "session store", timeout, waiter=False)

    def wait_turns(self, timeout=WAIT):
        """Wait cooperatively until the turn layer is imported too."""
        return self._ready_for(self._turns_ready, "turn layer", timeout)

    def wait(self, timeout=WAIT):
        """Wait cooperatively until the whole warm-up has ended (tools and sandbox too)."""
        return self._ready_for(self._ready, "tools and sandbox", timeout)

    def _ready_for(self, event, what, timeout, waiter=True):
        """Wait for ``event``; a ``waiter`` (one that needs the turn layer or the tools)
        does not hold back the thread that prepares them (:meth:`_settle`)."""
        if event is None or event.is_set():
            return True
        me = gevent.getcurrent()
        if waiter:
            self._waiters.add(me)
        try:
            if event.wait(timeout):
                return True
        finally:
            self._waiters.discard(me)
        log.warning("start-up warm-up (%s) not done after %.0f s; continuing without it",
                    what, timeout)
        return False

    def take_tools(self):
        tools, self.tools = self.tools, None
        return tools

    def take_store(self):
        store, self.store = self.store, None
        self._store_taken = True
        return store

    def close(self, timeout):
        """At shutdown: the warm-up (or the sandbox probe after it) is stopped, and a store
        it opened that no session manager took is closed: nothing of it outlives the
        server. A step running in a native thread finishes there on its own."""
        if self.greenlet is not None:
            self.greenlet.kill(block=True, timeout=timeout)
        if self._store_job is not None and not self._store_taken:
            self._store_job.join(timeout)
            store = self._store_job.value
            if store is not None:
                store.close()

    # ------------------------------------------------------------ on the hub
    def _run(self, then):
        # The thread holds the GIL while it imports; whenever the hub wakes up it waits for
        # the thread to let go, at most one switch interval (5 ms by default) each time.
        # Shorter while the warm-up runs, so a request meanwhile is not held up by it.
        shorten_switch_interval(SWITCH_INTERVAL)
        started = time.perf_counter()
        try:
            self._in_threads()
        finally:
            restore_switch_interval(SWITCH_INTERVAL)
            self._sessions_ready.set()
            self._turns_ready.set()
            self._ready.set()
        log.debug("warm-up: session store ready after %.1f ms, all done after %.1f ms",
                  ((self._sessions_at or started) - started) * 1000,
                  (time.perf_counter() - started) * 1000)
        if then is not None:
            then()

    def _in_threads(self):
        # One thread, one step after the other: a second thread saved little (a few ms
        # of disk waits) and cost more in GIL hand-overs.
        self.store = _wait(self._store_job)
        self._sessions_at = time.perf_counter()
        self._sessions_ready.set()
        if self._on_sessions is not None:  # on the hub, before the next step holds the GIL
            _step("session layer (hub)", self._on_sessions)
        self._settle()
        breathe()  # a look at the lines that came meanwhile
        _wait(_Thread(self._import_turn_layer))
        self._turns_ready.set()
        _wait(_Thread(self._prepare_turns))

    def _settle(self):
        """Wait (at most SETTLE) until every request in flight is one waiting for this
        warm-up: the import that comes next holds the GIL for tens of ms, and a request
        sharing it with the import took 2-5x longer (a first session/new 5-16 ms instead
        of 2-3). Polled: the hub wakes a few times during a call's few ms."""
        if self._in_flight is None:
            return
        now = time.monotonic()
        deadline, earliest = now + SETTLE, now + SETTLE_MIN
        # at least SETTLE_MIN: the face was built on the hub, and a request sent meanwhile
        # (the editor's session/new) may not have been read yet
        while now < earliest or (self._busy() and now < deadline):
            gevent.sleep(SETTLE_POLL)
            now = time.monotonic()

    def _busy(self):
        return any(glet not in self._waiters for glet in self._in_flight())

    # ------------------------------------------------------------ in the thread
    def _import_turn_layer(self):
        for name in self._turn_modules:
            _step(f"import {name}", importlib.import_module, name)
        _step("command plug-ins", _scan_commands)

    def _prepare_turns(self):
        for name in TURN_MODULES:
            _step(f"import {name}", importlib.import_module, name)
        self.tools = _step("tools", _load_tools, self.settings)


class _Thread:
    """``function()`` in a native thread of its own, whose value :meth:`get` waits for
    cooperatively. Not gevent's thread pool: the hub makes that on first use (importing
    ``gevent.threadpool`` and ``concurrent.futures``, ~4 ms on the hub, when the first
    calls are served); the turn layer's import brings those modules in off the hub."""

    def __init__(self, function):
        self._value = self._error = None
        self._done = Event()
        self._watcher = gevent.get_hub().loop.async_()  # signalled from the thread
        self._watcher.start(self._done.set)
        _start_new_thread(self._run, (function,))

    def _run(self, function):
        try:
            self._value = function()
        except BaseException as exc:  # noqa: BLE001 - handed to get() on the hub
            self._error = exc
        finally:
            self._watcher.send()

    def get(self, timeout):
        if not self._done.wait(timeout):
            # the thread still runs and will signal: the watcher stays open for it
            raise gevent.Timeout(timeout)
        self._watcher.close()
        if self._error is not None:
            raise self._error
        return self._value


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
    from term2acp.turns import commands

    commands.available()  # cached: the entry-point scan happens once per process


def _load_tools(settings):
    from term2acp.tools.registry import load_tools

    return load_tools(settings)


def _open_store(settings):
    """The opened store, or None (the manager opens it on first use and reports the error
    there). It opens in the store's own thread; a damaged file moved aside is told by the
    first session call's ``open()``."""
    from term2acp.sessions.errors import StoreError, StoreRecovered
    from term2acp.sessions.store import store_for

    store = store_for(settings)
    try:
        store.open()
    except StoreRecovered as notice:
        store.recovered = str(notice)
    except StoreError:
        store.close()
        return None
    return store
