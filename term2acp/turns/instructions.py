"""Project instructions: ``AGENTS.md`` files, given to the model as a context note
(turns/notes.py). Where a directory has no ``AGENTS.md``, its ``CLAUDE.md``, else its
``GEMINI.md`` (other agents' names for the same file) counts instead.

Where: the session root, then each parent directory up to the nearest one holding
``.git`` (the repository root); the same for each of the session's other roots
(``additionalDirectories``), whose files come before the root's. Never above the user's home directory, never ``/``; when
no ``.git`` is found on the way, only the root's own file counts. The farthest file comes
first and the nearest last (the most specific instructions win by coming last). Each file
is capped at :data:`FILE_CAP` characters and all of them at :data:`TOTAL_CAP`.

Reading needs no approval. Files are re-read when they change (path, size, mtime); the
user is told once which files are in use, and again when that set or a file changes.

A file, or a directory holding it, owned by another user than the agent's (or root) is
ignored, and the user told so: anyone can make a ``.git`` and an ``AGENTS.md`` in a
world-writable parent such as ``/tmp``, and its text would steer the model (git's
``safe.directory`` reasoning).
"""

import os
import stat

from term2acp.core.trust import foreign_notice, foreign_owner

NAME = "AGENTS.md"
NAMES = (NAME, "CLAUDE.md", "GEMINI.md")  # the first a directory has counts
FILE_CAP = 32_000  # characters of one file
TOTAL_CAP = 64_000  # characters of all of them


def candidates(root, home=None):
    """Directories whose AGENTS.md count, farthest first."""
    home = os.path.realpath(home or os.path.expanduser("~"))
    root = os.path.realpath(root)
    chain, current = [], root
    while True:
        if current == os.sep:
            break  # never at /
        chain.append(current)
        if os.path.exists(os.path.join(current, ".git")):
            return list(reversed(chain))
        parent = os.path.dirname(current)
        if current == home or parent == current:
            break  # never above the user's home
        current = parent
    return [root] if root != os.sep else []


def _stat(path):
    try:
        info = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return (info.st_size, info.st_mtime_ns) if stat.S_ISREG(info.st_mode) else None


def _read(path):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = os.read(fd, FILE_CAP * 4 + 4)
    finally:
        os.close(fd)
    text = data.decode("utf-8", "replace")
    if len(text) > FILE_CAP:
        text = text[:FILE_CAP] + f"\n[... {path} is longer; the rest was not read ...]"
    return text


class Instructions:
    """One session's view of its AGENTS.md files (cached by size and mtime)."""

    def __init__(self, root, home=None, extra=()):
        self.root, self.home = root, home
        self.extra = tuple(extra)  # the session's other roots: their files come first
        self._cache = {}  # path -> (signature, text)
        self._told = None  # the signatures the user was told about
        self._ignored = set()  # (path, owner) of foreign files the user was told about

    def load(self):
        """``(text for the context note, notice for the user or None)``."""
        found, warnings = [], []
        for directory in self.directories():
            path, signature = None, None
            for name in NAMES:
                path = os.path.join(directory, name)
                signature = _stat(path)
                if signature is not None:
                    break
            if signature is None:
                continue
            owner = foreign_owner(path)
            if owner is not None:
                if (path, owner) not in self._ignored:
                    self._ignored.add((path, owner))
                    warnings.append(foreign_notice(path, owner) + "\n\n")
                continue
            cached = self._cache.get(path)
            if cached is None or cached[0] != signature:
                text = _read(path)
                if text is None:
                    continue
                self._cache[path] = cached = (signature, text)
            found.append((path, cached[0], cached[1]))
        notice = "".join(warnings) + (self._notice(found) or "")
        return self._prompt(found), notice or None

    def directories(self):
        """Every directory whose AGENTS.md counts: the other roots' chains first, then the
        root's (its nearest file last, so it wins)."""
        chains = [candidates(r, self.home) for r in (*self.extra, self.root)]
        return list(dict.fromkeys(d for chain in reversed(chains[:-1]) for d in chain)) + \
            [d for d in chains[-1] if not any(d in c for c in chains[:-1])]

    def _prompt(self, found):
        if not found:
            return ""
        parts, left = [], TOTAL_CAP
        for path, _signature, text in reversed(found):  # nearest first while budgeting
            if left <= 0:
                break
            parts.insert(0, f'<instructions path="{path}">\n{text[:left]}\n</instructions>')
            left -= len(text)
        names = sorted({os.path.basename(path) for path, _signature, _text in found},
                       key=NAMES.index)
        return (f"\n\nProject instructions ({', '.join(names)}; follow them unless the user "
                "says otherwise; the nearest file comes last and wins):\n" + "\n".join(parts))

    def _notice(self, found):
        signatures = tuple((path, signature) for path, signature, _ in found)
        if signatures == self._told or (not found and self._told is None):
            return None
        first = self._told is None or not self._told
        self._told = signatures
        if not found:
            return "Project instructions: no AGENTS.md is in use any more.\n\n"
        paths = ", ".join(path for path, _, _ in found)
        if first:
            return f"Using project instructions from {paths}.\n\n"
        return f"Project instructions changed; re-read {paths}.\n\n"
