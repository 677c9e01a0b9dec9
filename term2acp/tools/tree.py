"""The workspace tree as the search tools see it: a walk by directory fds that honours
.gitignore, skips credential files, yields to the hub and stops at an overall bound.

Time of use: the walk opens its top directory, then every directory below it relative to
its parent's fd, with O_NOFOLLOW, and checks each opened fd once with the kernel
(:func:`term2acp.tools.paths.open_checked`). A directory swapped for a symlink mid-walk
is therefore never entered, and a file is opened the same way by whoever consumes the
walk (:meth:`Visit.open`). Symlinks are listed by name, never followed; ``.git`` is
always skipped; ``.gitignore`` files from the search directory and its ancestors up to
the root prune (read the same way). The matcher covers the common rules: ``*``, ``?``,
``[...]``, ``**``, ``!negation``, ``dir/`` only, and patterns anchored by a slash, on RE2
(:mod:`term2acp.tools.patterns`), so a hostile line cannot pin the CPU. Global excludes
and ``.git/info/exclude`` are not read.

Credential and shell start-up files (:mod:`term2acp.core.sensitive`) are skipped and
counted unless the walk starts inside one (then the user approved that directory).

Pacing: :class:`Pacer` yields to the hub every few milliseconds of work, so cancel,
``session/list`` and shutdown are served while a search runs, and ends the search when
its time budget is spent.
"""

import os
import stat
import time
from typing import NamedTuple

import gevent

from term2acp.core.sensitive import home_dir, is_sensitive
from term2acp.core.workspace import is_within
from term2acp.tools.paths import DIR_FLAGS, FILE_FLAGS, open_checked
from term2acp.tools.patterns import IgnoreRules

MAX_WALK = 200_000  # entries visited before a search gives up
MAX_DEPTH = 100  # directory levels below the top (one fd each while the walk is inside)
MAX_IGNORE_BYTES = 1024 * 1024
SEARCH_SECONDS = 60.0  # wall-clock budget of one search
SLICE = 0.005  # seconds of work between two yields to the hub


class Pacer:
    """Yield to the hub every SLICE seconds; ``tick()`` turns False once the budget is out."""

    def __init__(self, budget=None):
        self.budget = SEARCH_SECONDS if budget is None else budget
        self.last = time.monotonic()
        self.deadline = self.last + self.budget
        self.expired = False

    def tick(self):
        now = time.monotonic()
        if now - self.last >= SLICE:
            gevent.idle()  # I/O (cancel, other requests) and timers run here; not sleep(0)
            self.last = now = time.monotonic()
        if now > self.deadline:
            self.expired = True
        return not self.expired


def read_regular(path, limit, dir_fd=None):
    """``(data, size)`` of a regular file, data None when above ``limit``; None when ``path``
    is anything else or changed while being opened. Never blocks, never follows a symlink."""
    try:
        fd = open_checked(path, FILE_FLAGS, dir_fd)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        return (fh.read(limit) if st.st_size <= limit else None), st.st_size


class Ignorer:
    """The .gitignore rules in force in one directory; the deepest matching file decides,
    and within a file the last matching rule."""

    def __init__(self, layers=()):
        self.layers = layers  # tuples (base dir, IgnoreRules), shallow to deep

    def child(self, directory, dir_fd=None):
        """Add ``directory``'s .gitignore, read relative to ``dir_fd`` (the open directory)."""
        path = os.path.join(directory, ".gitignore")
        read = read_regular(path, MAX_IGNORE_BYTES, dir_fd)
        if not read or not read[0]:
            return self
        rules = IgnoreRules(read[0].decode("utf-8", errors="replace").splitlines())
        return Ignorer(self.layers + ((directory, rules),)) if rules else self

    def ignored(self, path, is_dir):
        for base, rules in reversed(self.layers):
            if path == base or not is_within(base, path):
                continue
            decided = rules.decide(path[len(base.rstrip("/")) + 1:], is_dir)
            if decided is not None:
                return decided
        return False


def ignorer_for(ctx, top):
    """Rules from the root's .gitignore down to ``top``'s parent (``top`` loads its own),
    reached through directory fds like the walk."""
    ignorer = Ignorer()
    if not is_within(ctx.root, top) or top == ctx.root:
        return ignorer
    chain = os.path.relpath(os.path.dirname(top), ctx.root).split(os.sep)
    directory = ctx.root
    try:
        fd = open_checked(directory, DIR_FLAGS)
    except OSError:
        return ignorer
    try:
        ignorer = ignorer.child(directory, fd)
        for part in chain if chain != ["."] else []:
            directory = os.path.join(directory, part)
            child = open_checked(directory, DIR_FLAGS, fd)
            os.close(fd)
            fd = child
            ignorer = ignorer.child(directory, fd)
    except OSError:
        pass  # changed meanwhile: the walk's own open of top will tell
    finally:
        os.close(fd)
    return ignorer


class Visit(NamedTuple):
    """One walked entry. ``dir_fd`` (its directory) is open until the walk moves on."""

    path: str  # canonical: the checked top joined with names, no symlink followed
    is_dir: bool
    is_file: bool  # a regular file (never a symlink)
    dir_fd: int

    def open(self):
        """An fd on this file, opened relative to its directory and checked (or OSError)."""
        return open_checked(self.path, FILE_FLAGS, self.dir_fd)


class TreeWalk:
    """Pre-order, sorted by name (so paths come out sorted), symlinks never followed;
    yields :class:`Visit`. After the walk: ``truncated`` (MAX_WALK stopped it),
    ``expired`` (the pacer's budget did), ``changed`` (directories that changed while
    being opened, skipped), ``sensitive`` (credential files skipped), ``deep``.

    ``wanted(name, path)``: when given, an entry that is not a directory is yielded only
    if it says yes, and it is asked first, so the entries it refuses (most of a tree, for
    glob) cost no ignore check; those that would count as credential files still do."""

    def __init__(self, top, ignorer, no_ignore=False, prune=None, pacer=None, wanted=None):
        self.top, self.ignorer, self.no_ignore = top, ignorer, no_ignore
        self.prune = prune
        self.pacer = pacer or Pacer()
        self.wanted = wanted
        self.home = home_dir()
        self.skip_sensitive = not is_sensitive(top, self.home)
        # Outside the home directory only dot-names can be credential files (.env*), so
        # the full check runs for those alone; in or above home it runs for every entry.
        self.near_home = is_within(self.home, top) or is_within(top, self.home)
        self.truncated = False
        self.changed = self.sensitive = self.deep = 0

    def __iter__(self):
        stack, seen = [], 0
        try:
            fd = open_checked(self.top, DIR_FLAGS)
        except OSError:
            self.changed += 1
            return
        wanted, tick = self.wanted, self.pacer.tick
        counted = self.skip_sensitive and self.near_home  # every name may be a credential
        try:
            stack.append(self._frame(fd, self.top, self.ignorer))
            while stack:
                fd, prefix, entries, ignorer = stack[-1]
                for name, is_dir, is_file in entries:
                    seen += 1
                    if not seen & 63 and not tick() or seen > MAX_WALK:
                        self.truncated = seen > MAX_WALK
                        return
                    path = prefix + name
                    if wanted is not None and not is_dir and not wanted(name, path):
                        if counted or name[:1] == ".":
                            self._skipped(path, name, is_dir, ignorer)  # counts it
                        continue
                    if self._skipped(path, name, is_dir, ignorer):
                        continue
                    yield Visit(path, is_dir, is_file, fd)
                    if is_dir:
                        self._descend(stack, fd, path, ignorer)
                        break  # into it; this directory's iterator goes on afterwards
                else:
                    os.close(stack.pop()[0])
        finally:
            for frame in stack:
                os.close(frame[0])

    @property
    def expired(self):
        return self.pacer.expired

    def _skipped(self, path, name, is_dir, ignorer):
        if name == ".git" or self.prune is not None and self.prune(path, is_dir):
            return True
        if not self.no_ignore and ignorer.layers and ignorer.ignored(path, is_dir):
            return True
        if self.skip_sensitive and (self.near_home or name[:1] == ".") \
                and is_sensitive(path, self.home):
            self.sensitive += 1
            return True
        return False

    def _descend(self, stack, parent_fd, path, ignorer):
        if len(stack) > MAX_DEPTH:
            self.deep += 1
            return
        try:
            fd = open_checked(path, DIR_FLAGS, parent_fd)
        except OSError:  # swapped for a symlink, moved, removed: never entered
            self.changed += 1
            return
        stack.append(self._frame(fd, path, ignorer))

    def _frame(self, fd, directory, ignorer):
        """``(fd, path prefix, iterator of (name, is_dir, is_file), ignorer)``; fd is
        owned."""
        try:
            ignorer = ignorer if self.no_ignore else ignorer.child(directory, fd)
            prefix = directory if directory.endswith("/") else directory + "/"
            return fd, prefix, iter(self._list(fd)), ignorer
        except BaseException:
            os.close(fd)
            raise

    def _list(self, fd):
        entries, tick = [], self.pacer.tick
        try:
            with os.scandir(fd) as it:
                for entry in it:
                    if not len(entries) & 63 and not tick() or len(entries) > MAX_WALK:
                        break
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            entries.append((entry.name, True, False))
                        else:
                            entries.append((entry.name, False,
                                            entry.is_file(follow_symlinks=False)))
                    except OSError:
                        continue
        except OSError:
            return []
        entries.sort()
        return entries
