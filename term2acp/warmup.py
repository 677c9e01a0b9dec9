"""Start-up work off the hub: what the first session call would otherwise pay for.

Once ``initialize`` is answered, a native thread (gevent's threadpool) imports the session
layer of the negotiated face, the providers and the sandbox (``sh``), scans the tool and
command entry points, loads the tools and opens the session store (SQLite PRAGMAs and
migrations). The hub keeps serving meanwhile. Anything on the hub that would import those
modules first waits for the warm-up cooperatively (:meth:`Warmup.wait`): an ``import`` of a
module another thread is importing blocks on the interpreter's module lock, a native lock
that would stall every greenlet.

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

SWITCH_INTERVAL = 0.0005  # seconds: the GIL's hand-over period while the warm-up runs
WAIT = 30.0  # seconds the hub waits for the warm-up before doing the work itself
# First what any session call needs (session/new right after initialize waits for this
# part only), then what the first prompt needs (tools, the sandbox and its ``sh``).
SESSION_MODULES = ("term2acp.sessions.manager", "term2acp.acp.translate",
                   "term2acp.acp.permissions", "term2acp.agent.commands",
                   "term2acp.providers.http", "term2acp.providers.openai",
                   "term2acp.providers.anthropic")
TURN_MODULES = ("term2acp.tools.registry", "term2acp.sandbox.bwrap")
FACES = {1: "term2acp.acp.v1.sessions", 2: "term2acp.acp.sessions"}


class Warmup:
    def __init__(self, settings):
        self.settings = settings
        self.tools = None  # name -> Tool, loaded off the hub (None: load on the hub)
        self.store = None  # an opened Store (None: the manager opens its own)
        self._sessions_ready = self._turns_ready = None  # Events, once scheduled

    def schedule(self, version, then=None, delay=0.001):
        """Plan the warm-up (once): from now on waiters wait for it. It starts ``delay``
        seconds later (after the initialize answer has been written), runs in a native
        thread, then ``then()`` runs on the hub."""
        if self._sessions_ready is None:
            self._sessions_ready, self._turns_ready = Event(), Event()
            gevent.spawn_later(delay, self._run, version, then).name = "warm-up"

    def _run(self, version, then):
        pool = gevent.get_hub().threadpool
        # The thread holds the GIL while it imports; whenever the hub wakes up it waits for
        # the thread to let go, at most one switch interval (5 ms by default) each time.
        # Shorter while the warm-up runs, so a request meanwhile is not held up by it.
        interval = sys.getswitchinterval()
        sys.setswitchinterval(min(interval, SWITCH_INTERVAL))
        try:
            self._run_phases(pool, version)
        finally:
            sys.setswitchinterval(interval)
        if then is not None:
            then()

    def _run_phases(self, pool, version):
        started = time.perf_counter()
        try:  # the store open waits mostly on the disk (fsync): beside the imports
            store = pool.spawn(_step, "session store", _open_store, self.settings)
            _wait(pool.spawn(self._prepare_sessions, version), "session layer")
            _wait(store, "session store")
            self.store = store.value if store.successful() else None
        finally:
            self._sessions_ready.set()
        sessions = time.perf_counter()
        try:
            _wait(pool.spawn(self._prepare_turns), "tools and sandbox")
        finally:
            self._turns_ready.set()
        log.debug("warm-up: session layer ready after %.1f ms, tools and sandbox %.1f ms "
                  "later", (sessions - started) * 1000, (time.perf_counter() - sessions) * 1000)

    def wait_sessions(self, timeout=WAIT):
        """Wait cooperatively until the session layer is ready (True at once when no
        warm-up was scheduled)."""
        return _ready(self._sessions_ready, "session layer", timeout)

    def wait(self, timeout=WAIT):
        """Wait cooperatively for the whole warm-up (tools and sandbox included)."""
        return _ready(self._turns_ready, "tools and sandbox", timeout)

    # ------------------------------------------------------------ the native thread
    def _prepare_sessions(self, version):
        for name in (FACES.get(version, FACES[2]), *SESSION_MODULES):
            _step(f"import {name}", importlib.import_module, name)
        _step("command plug-ins", _scan_commands)

    def _prepare_turns(self):
        for name in TURN_MODULES:
            _step(f"import {name}", importlib.import_module, name)
        self.tools = _step("tool plug-ins", _load_tools, self.settings)

    def take_tools(self):
        tools, self.tools = self.tools, None
        return tools

    def take_store(self):
        store, self.store = self.store, None
        return store


def _wait(result, what, timeout=WAIT):
    try:
        result.get(timeout=timeout)
    except gevent.Timeout:
        log.warning("start-up warm-up (%s) still running after %.0f s; continuing without it",
                    what, timeout)
    except Exception:  # noqa: BLE001 - steps catch their own errors: a thread failure
        log.warning("start-up warm-up (%s) failed", what, exc_info=True)


def _ready(event, what, timeout):
    if event is None or event.wait(timeout):
        return True
    log.warning("start-up warm-up (%s) not ready after %.0f s; continuing without it",
                what, timeout)
    return False


def _step(what, function, *args):
    try:
        return function(*args)
    except Exception:  # noqa: BLE001 - the hub does it again and reports it there
        log.debug("warm-up step %s failed; the hub will do it", what, exc_info=True)
        return None


def _scan_commands():
    from term2acp.agent import commands

    commands.available()  # cached: the entry-point scan happens once per process


def _load_tools(settings):
    from term2acp.tools.registry import load_tools

    return load_tools(settings)


def _open_store(settings):
    from term2acp.sessions.errors import StoreError, StoreRecovered
    from term2acp.sessions.manager import store_path
    from term2acp.sessions.store import Store

    store = Store(store_path(settings))
    try:
        store.open()
    except StoreRecovered as exc:  # opened on a fresh file: the notice is told on first use
        store.recovered = str(exc)
    except StoreError:
        return None  # the manager opens it on first use and reports the error there
    return store
