"""The programs the agent itself starts outside the sandbox (bubblewrap, an MCP server given
as a bare command such as ``npx``): found once, on absolute PATH entries only, never in a
place the model or a sandboxed command can write.

A relative PATH entry (``./node_modules/.bin``, or an empty one, which means the current
directory) names a directory inside the project the agent runs in, where the model writes
files: a ``bwrap`` planted there would run every later command outside the sandbox, an
``npx`` there would run with the editor's tokens. So only absolute entries are searched (Go's
``exec.LookPath`` rule). The PATH searched is the one the agent started with
(:func:`pin_environment`, at start-up), and each answer is pinned for the life of the
process: a file appearing later earlier on PATH changes nothing. :func:`check` refuses an
answer inside any session root (:func:`note_root`), which the tools and the sandbox write.
"""

import os
import threading

_lock = threading.Lock()
_path = []  # [the PATH the agent started with], once pinned
_found = {}  # (name, PATH) -> the path found, or None: pinned for the life of the process
_roots = set()  # every session root of this process


class Unsafe(Exception):
    """The program found lies where the model or a sandboxed command can write."""


def pin_environment(environ=None):
    """Take the PATH to search from the environment the agent started with (once)."""
    with _lock:
        if not _path:
            _path.append((environ if environ is not None else os.environ).get("PATH", os.defpath))
    return _path[0]


def search_dirs(path=None):
    """The absolute directories of ``path`` (default: the pinned PATH), in order; empty and
    relative entries are skipped."""
    path = pin_environment() if path is None else path
    return [entry for entry in path.split(os.pathsep) if entry and os.path.isabs(entry)]


def find(name, path=None):
    """The executable ``name`` on ``path`` (default: the PATH the agent started with), or
    None; the first answer for a (name, path) is kept for the life of the process."""
    key = (name, pin_environment() if path is None else path)
    with _lock:
        if key in _found:
            return _found[key]
    found = _search(name, key[1])
    with _lock:
        return _found.setdefault(key, found)


def _search(name, path):
    if not name or os.sep in name:
        return None
    for folder in search_dirs(path):
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def note_root(root):
    """Remember a session root: no program the agent starts may come from inside it. ``/``
    is never one (refused as a workspace everywhere; it would refuse every program)."""
    root = os.path.realpath(root)
    if root != os.sep:
        with _lock:
            _roots.add(root)


def noted_roots():
    """The session roots noted so far. The in-process test kit (``testing/inprocess.py``)
    serves agents one after another in one process; each is a process of its own as far
    as its roots go: :func:`keep_only` puts back what was noted before it."""
    with _lock:
        return frozenset(_roots)


def keep_only(roots):
    with _lock:
        _roots.intersection_update(roots)


def check(program, roots=()):
    """Raise :class:`Unsafe` when ``program`` (or what it links to) is inside a session root
    (any noted one or ``roots``): the model could have written it."""
    targets = {os.path.abspath(program), os.path.realpath(program)}
    with _lock:
        every = _roots | {os.path.realpath(root) for root in roots} - {os.sep}
    for root in sorted(every):
        base = root.rstrip(os.sep) + os.sep
        if any(target == root or target.startswith(base) for target in targets):
            raise Unsafe(f"{program} is inside the workspace {root}, where the agent and its "
                         "commands write files; the agent does not run programs from there. "
                         "Install it outside the workspace or give its absolute path")
