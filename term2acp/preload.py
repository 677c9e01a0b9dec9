"""What only prompts need, prepared in one thread the first time something needs it.

Everything else is imported at the top of its module before the first line is read. The
tools (with the sandbox and ``sh``), the providers' HTTP client, the default provider's
module and the scans of the tool and command plug-ins take tens of ms of CPU: neither
``initialize`` nor a first ``session/new`` pays for them. The first caller of
:meth:`Preload.wait` starts their preparation: the slash commands and model listing a new
session announces after its answer (or a prompt). Once the lines queued by then are
written (the session's answer), a thread of gevent's pool does the work: it shares the
interpreter with no session call an editor sends right after ``initialize``, and it is
done long before a person has typed a prompt. ``ready`` is set when it is done, or has
failed. The sandbox module comes first, and the sandbox is probed (a bwrap run, on the
hub) right then: the rest of the loading waits for bwrap to have started (at most
``PROBE_FIRST``), so the launch, which holds the hub a few milliseconds, has no import
beside it and does not land when the prompts that waited for ``ready`` go on at once;
``ready`` never waits for the probe's end. Once the hub is idle after that, web_fetch's
HTML converter (``CONVERTER``, ~20 ms of imports) is loaded in the thread, so no first
fetch pays for it.
When the thread failed, :meth:`Preload.tools` loads the tools on the hub, which reports
the error where it always did.

Why callers wait instead of importing too: under gevent's monkey-patching the
interpreter's per-module import locks are gevent locks, so a greenlet importing a module
the thread is importing waits for the thread anyway.
"""

import importlib
import logging

import gevent
from gevent.event import Event

from term2acp.core import loading
from term2acp.turns import commands

log = logging.getLogger(__name__)

WAIT = 30.0  # seconds a caller waits for the preload before doing the work itself
PROBE_FIRST = 0.2  # seconds the loading waits for the sandbox probe's launch
SANDBOX_MODULE = "term2acp.sandbox.bwrap"
MODULES = ("term2acp.providers.http", SANDBOX_MODULE, "term2acp.tools.registry")
CONVERTER = "html_to_markdown"
SANDBOX = "available: writes only inside the workspace root, no network, credentials hidden"


class Preload:
    def __init__(self, settings, catalog, flushed=None):
        self.settings = settings
        self.catalog = catalog
        self._flushed = flushed  # () -> once the lines queued so far are written
        self.ready = Event()
        self.done = Event()  # set once the whole preload (probe, converter) has run
        self.greenlet = None  # runs the preload
        self.prober = None  # runs the sandbox probe, beside the preload
        self._tools = None  # name -> Tool, loaded by the thread or by the first prompt
        self._note = None  # what the sandbox probe found

    def start(self):
        """Start the preload (once); returns at once."""
        if self.greenlet is None:
            modules = MODULES + tuple(filter(None, [self.catalog.provider_module()]))
            self.greenlet = gevent.spawn(self._run, modules)
            self.greenlet.name = "preload"

    def wait(self, timeout=WAIT):
        """Start the preload if needed and wait for it cooperatively (bounded)."""
        self.start()
        if self.ready.wait(timeout):
            return True
        log.warning("preload not done after %.0f s; continuing without it", timeout)
        return False

    def close(self, timeout):
        """At shutdown: the preload and the sandbox probe stop (its bwrap is killed); work
        already in the pool's thread finishes there on its own."""
        for greenlet in (self.greenlet, self.prober):
            if greenlet is not None:
                greenlet.kill(block=True, timeout=timeout / 2)

    def tools(self):
        """``name -> Tool`` for the sessions (loaded here if the thread could not)."""
        if self._tools is None:
            self.wait()
            if self._tools is None:
                self._tools = _load_tools(self.settings)
        return self._tools

    def sandbox_note(self):
        """What the shell's sandbox can do, for the model's context notes."""
        if self._note is None:
            self.wait()
            self._note = _note(importlib.import_module(SANDBOX_MODULE).probe())
        return self._note

    def _run(self, modules):
        if self._flushed is not None:
            self._flushed()
        try:
            try:
                loading.in_thread(importlib.import_module, SANDBOX_MODULE)
                # the probe (a bwrap run: its launch holds the hub a few ms) goes now,
                # not when the prompts that waited for ready go on at once, and its
                # launch with no import beside it (each of its system calls would wait
                # for the thread); a launch that is slow holds nothing back for longer
                # than PROBE_FIRST
                launched = Event()
                self.prober = gevent.spawn(self._probe, launched.set)
                self.prober.name = "sandbox-probe"
                gevent.wait([launched, self.prober], timeout=PROBE_FIRST, count=1)
                self._tools = loading.in_thread(_prepare, modules, self.settings)
            except Exception:  # noqa: BLE001 - tools() does it again and reports it
                log.warning("preloading the tools failed; the first prompt loads them",
                            exc_info=True)
            finally:
                self.ready.set()
            if self.prober is not None:
                self.prober.join()
            gevent.idle()  # after the work that waited for ready (twenty prompts, say)
            loading.in_thread(importlib.import_module, CONVERTER)
        except Exception:  # noqa: BLE001 - the first page converted imports it, and says
            log.debug("preloading %s failed", CONVERTER, exc_info=True)
        finally:
            self.done.set()

    def _probe(self, launched):
        try:
            status = importlib.import_module(SANDBOX_MODULE).probe(on_launch=launched)
            self._note = self._note or _note(status)
        except Exception:  # noqa: BLE001 - the first prompt probes again, and says
            log.debug("the sandbox probe failed", exc_info=True)


def _note(status):
    if status.available:
        return SANDBOX
    log.warning("%s", status.warning())
    return f"unavailable ({status.reason}); shell calls are refused"


def _prepare(modules, settings):
    """In the pool's thread: import ``modules``, scan the command plug-ins, load the tools
    and build their model-facing specs (cached on each tool: the first model round of the
    process does not build twenty JSON schemas on the hub)."""
    for name in modules:
        importlib.import_module(name)
    commands.available()  # cached: the entry-point scan happens once per process
    tools = _load_tools(settings)
    for tool in tools.values():
        tool.spec()
    return tools


def _load_tools(settings):
    return importlib.import_module("term2acp.tools.registry").load_tools(settings)
