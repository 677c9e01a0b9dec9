"""gevent's monkey patching, done once and first by the launchers.

gevent announces patching to third-party plug-ins through entry points, which makes it
scan the metadata of every installed distribution several times (about 100 ms, most of
the agent's start-up). term2acp uses no such plug-in, so the announcement goes only to
in-process subscribers (``gevent.events.notify``).

The cyclic garbage collector is off from here until the editor's first calls are served
(``core.pacing.start_up_done``): start-up creates ~150,000 objects that live as long as
the process, and the collections their allocations triggered (~30) cost ~10 ms.

``ssl`` and ``subprocess`` are patched when something first imports them, not here:
patching them imports both (and gevent's versions), ~15 ms of a start-up that answers
``initialize`` in ~100 ms, while nothing imports either before a provider, an MCP server
or a shell command is first used (off the hub, in the warm-up). gevent asks that ``ssl``
be patched before it is imported, and so it is: :class:`_PatchOnFirstImport` sits first
on ``sys.meta_path`` and patches the module as its first import begins, so no importer
ever sees the unpatched one (``tests/unit/test_patching.py`` checks both in a fresh
interpreter).

gevent's hub formats the context of a failed greenlet with ``pprint.saferepr``, imported as
the hub is made; ``pprint`` imports ``dataclasses`` (~1.5 ms of start-up). The launcher
names the same function behind a lazy import (:func:`context_repr`), unless the user
chose one (``GEVENT_FORMAT_CONTEXT``).

gevent also walks the whole heap while it patches ``threading`` (its "existing locks"
pass, ~20 % of patching): it looks for locks the caller holds at that moment, to hand them
to the main greenlet. A launcher holds none: it patches first thing, at the top level of
a script, outside any import. :func:`_lean_existing_locks` keeps the rest of that pass
and leaves the heap alone; when patching happens inside an import (an import lock is
held) or with other threads running, gevent's own pass runs as before.
"""

import gc
import os
import sys

DEFERRED = ("ssl", "subprocess")


def patch_all():
    import gevent.events
    from gevent import monkey

    if monkey.is_module_patched("socket"):
        return
    gc.disable()
    announce = gevent.events.notify_and_call_entry_points
    gevent.events.notify_and_call_entry_points = gevent.events.notify
    locks = _thread_patcher()
    existing_locks = getattr(locks, "_patch_existing_locks", None)
    if existing_locks is not None and not _importing():
        locks._patch_existing_locks = _lean_existing_locks(existing_locks)
    try:
        deferred = [name for name in DEFERRED if name not in sys.modules]
        monkey.patch_all(**{name: False for name in deferred})
    finally:
        gevent.events.notify_and_call_entry_points = announce
        if existing_locks is not None:
            locks._patch_existing_locks = existing_locks
    if "GEVENT_FORMAT_CONTEXT" not in os.environ:
        gevent.config.format_context = "term2acp.patching.context_repr"
    if deferred:
        sys.meta_path.insert(0, _PatchOnFirstImport(
            {"ssl": monkey.patch_ssl, "subprocess": monkey.patch_subprocess}, deferred))


def context_repr(value):
    """gevent's default formatter of a failed greenlet's context, imported on first use."""
    from pprint import saferepr

    return saferepr(value)


def _thread_patcher():
    """gevent's module that patches ``threading`` (None if this gevent has another)."""
    try:
        from gevent.monkey import _patch_thread_common
    except ImportError:  # pragma: no cover - a gevent laid out differently
        return None
    return _patch_thread_common


def _importing():
    """True when this call runs inside an import (the import system holds a module lock
    that gevent's existing-locks pass must hand over)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib."):
            return True
        frame = frame.f_back
    return False


def _lean_existing_locks(full):
    """gevent's existing-locks pass without its heap walk, for a caller that holds no lock
    (see the module's docstring); ``full`` is gevent's pass, run when other threads
    exist."""

    def existing_locks(threading):
        if len(threading.enumerate()) != 1:
            return full(threading)
        # what the pass does besides the walk: threading's registry lock becomes a gevent
        # lock (a native one held across a greenlet switch can deadlock thread start/stop)
        threading._active_limbo_lock = threading._allocate_lock()
        futures = sys.modules.get("concurrent.futures.thread")
        if futures is not None and hasattr(futures, "_global_shutdown_lock"):
            # its at-fork lock (imported later, it is made with the patched lock anyway)
            futures._global_shutdown_lock = threading._allocate_lock()
        return None

    return existing_locks


class _PatchOnFirstImport:
    """A meta path finder for the deferred modules: the first import of one (or of gevent's
    version of it, e.g. ``gevent.subprocess``) runs gevent's patch for it, which imports
    gevent's module and through it the real one and patches that; then it hands the
    import system the module asked for. It removes itself once every deferred module is
    patched."""

    def __init__(self, patchers, names):
        self._patchers = {}  # module name -> (the stdlib name it patches, patch function)
        for name in names:
            self._patchers[name] = self._patchers["gevent." + name] = (name, patchers[name])
        self._patching = set()

    def find_spec(self, name, path=None, target=None):
        entry = self._patchers.get(name)
        if entry is None or entry[0] in self._patching:
            return None  # not ours, or an import made by the patch itself
        key, patch = entry
        self._patching.add(key)
        try:
            patch()
        finally:
            self._patching.discard(key)
        self._patchers.pop(key, None)
        self._patchers.pop("gevent." + key, None)
        if not self._patchers and self in sys.meta_path:
            sys.meta_path.remove(self)
        from importlib.machinery import ModuleSpec

        # The import system reads a module that appeared meanwhile back through its own
        # __spec__ (and would otherwise execute the real spec's loader again, into a new,
        # unpatched module): both name the loader below until it restores the real spec.
        module = sys.modules[name]
        spec = ModuleSpec(name, _Patched(module), origin=getattr(module, "__file__", None))
        module.__spec__ = spec
        return spec


class _Patched:
    """The loader of a module patched and imported already: the import system gets that
    very module back, its own ``__spec__`` and ``__loader__`` restored."""

    def __init__(self, module):
        self._module = module
        self._spec = module.__spec__
        self._loader = getattr(module, "__loader__", None)

    def create_module(self, spec):
        return self._module

    def exec_module(self, module):
        module.__spec__ = self._spec
        module.__loader__ = self._loader
