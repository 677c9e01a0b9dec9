"""Checkpoints: before a turn changes a file, what the file was.

Every prompt turn that reaches the model is a row of ``turns`` (where its messages begin in
the history, its user message, whether /undo took it back). While it runs, its
:class:`TurnCheckpoint` records each file the first time the turn is about to change it,
in ``checkpoint_files``:

* the file tools call :meth:`TurnCheckpoint.before_write` from the shared write path
  (``ToolContext.before_write``), so create, edit and patch writes are always recorded;
* a tool that may change files some other way (a command: any kind but read, search,
  think and fetch, unless the tool records its own writes) is wrapped in
  :meth:`before_command` / :meth:`after_command`: in a git workspace a snapshot before and
  after (``sessions/snapshots.py``, a repository of our own: the user's branches, index,
  stash and working tree are never touched) names what it changed and holds what it was;
  elsewhere the turn notes that its changes were not recorded, so /undo can say so.

When the turn ends each recorded file gets a hash of what the turn left, which /undo
compares to find files the user changed since. The rows go to the store with the
session's other writes (no extra commit), so a crash loses nothing reported.

Credential files (``core/sensitive.py``: ``.env`` and the like) are named, never copied:
the store holds no secrets, so /undo cannot put them back and says so.

Size: one session keeps at most ``checkpoint_max_mb`` of file contents; past that the
oldest turns' contents are dropped (their /undo says so) and a single file above the
bound is not recorded (named as such).
"""

import hashlib
import logging
import os
import stat

from gevent.lock import Semaphore

from term2acp.core import offhub
from term2acp.core.sensitive import is_sensitive
from term2acp.turns.modes import SAFE_KINDS
from term2acp.turns.snapshots import GitSnapshots, SnapshotError, repository_of

log = logging.getLogger(__name__)


def fingerprint(path):
    """What is at ``path`` now: None (absent), ``sha256:<hex>`` of a regular file,
    ``link:<target>``, or ``other`` (a directory, a device...)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError:
        return "other"
    if stat.S_ISLNK(st.st_mode):
        return "link:" + os.readlink(path)
    if not stat.S_ISREG(st.st_mode):
        return "other"
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return "other"
    return "sha256:" + digest.hexdigest()


def digest_of(state, content):
    """The fingerprint of a recorded state (what :func:`fingerprint` says of it)."""
    if state == "absent":
        return None
    if state == "link":
        return "link:" + content.decode("utf-8", "surrogateescape")
    return "sha256:" + hashlib.sha256(content).hexdigest()


def max_bytes(settings):
    return int(float(settings.checkpoint_max_mb) * 2**20)


def private_dir(settings, session_id):
    """Our per-session directory for git snapshots (removed with the session)."""
    return os.path.join(settings.data_dir, "checkpoints", session_id)


def records_itself(tool):
    """The tool's writes reach :meth:`TurnCheckpoint.before_write` (the file tools)."""
    return getattr(tool, "records_writes", False)


def may_change_files(tool):
    return getattr(tool, "kind", "other") not in SAFE_KINDS and not records_itself(tool)


class TurnCheckpoint:
    def __init__(self, session, settings, turn_id):
        self.session = session
        self.store = session.store
        self.turn_id = turn_id  # the turn's user message id
        self.roots = (session.root, *session.extra_roots)  # each a workspace, snapshot apart
        self.limit = max_bytes(settings)
        self.paths = {}  # path -> fingerprint the turn left (filled by finish)
        self.notes = []
        self._gits = None  # root -> GitSnapshots, or None where the root is not in git
        self._settings = settings
        self._trees = {}  # root -> the last snapshot, still the work tree's state
        self._running = 0  # commands between before_command and after_command
        self._lock = None  # one git call at a time (a round's calls run side by side)

    # ------------------------------------------------------------ the turn's row
    @classmethod
    def begin(cls, session, settings, message_id, prompt):
        """The turn of the user message ``message_id`` begins (before its history)."""
        session.store.turns.begin(session.id, message_id, session.history_rows, prompt)
        return cls(session, settings, message_id)

    def finish(self):
        """The turn ended (any way): what it left of each file, and its notes."""
        for path in self.paths:
            self.store.turns.file_left(self.session.id, self.turn_id, path,
                                       fingerprint(path) or "absent")
        self.store.turns.finish(self.session.id, self.turn_id, self.notes)
        if self.paths:
            self._bound()

    # ------------------------------------------------------------ file tools
    def before_write(self, path):
        """``path`` (canonical) is about to be written, replaced or removed."""
        self._trees.clear()  # a later command's "before" must include this write
        if path in self.paths:
            return
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            self._put(path, "absent", None, b"")
            return
        except OSError as exc:
            self._put(path, "unrecorded", None, b"", f"it could not be read ({exc.strerror})")
            return
        if stat.S_ISLNK(st.st_mode):
            self._put(path, "link", None, os.fsencode(os.readlink(path)))
        elif not stat.S_ISREG(st.st_mode):
            self._put(path, "unrecorded", None, b"", "it is not a regular file")
        elif st.st_size > self.limit:
            self._put(path, "unrecorded", None, b"",
                      f"it was larger than the checkpoint limit ({self.limit // 2**20} MiB)")
        else:
            try:
                with open(path, "rb") as fh:
                    data = offhub.heavy(st.st_size, fh.read)
            except OSError as exc:
                self._put(path, "unrecorded", None, b"", f"it could not be read ({exc.strerror})")
                return
            self._put(path, "file", stat.S_IMODE(st.st_mode), data)

    def _put(self, path, state, mode, content, why=None):
        if state in ("file", "link") and is_sensitive(path):  # no secrets in the store
            state, mode, content, why = "unrecorded", None, b"", (
                "it is a credential file, of which term2 keeps no copy")
        self.paths[path] = None
        self.store.turns.record_file(self.session.id, self.turn_id, path, state, mode, content,
                                     why)

    # ------------------------------------------------------------ commands
    def _snapshots(self):
        """Each root's snapshots (None for a root not in a git repository); the main
        root's keep their place of old, the others one each beside it."""
        if self._gits is None:
            folder = private_dir(self._settings, self.session.id)
            self._gits = {}
            for root in self.roots:
                dotgit = repository_of(root)
                name = "git" if root == self.roots[0] else (
                    "git-" + hashlib.sha256(os.fsencode(root)).hexdigest()[:16])
                self._gits[root] = None if dotgit is None else GitSnapshots(
                    root, os.path.join(folder, name), dotgit)
        return self._gits

    def _where(self, root):
        return "the workspace" if root == self.roots[0] else root

    def before_command(self, name):
        """A tool that may change files some other way is about to run; returns the
        snapshots to hand to :meth:`after_command` (root -> tree; a root without one is
        named in the turn's notes)."""
        before = {}
        with self._serial():
            self._running += 1
        for root, git in self._snapshots().items():
            if git is None:
                self._note(f"{name} ran and {self._where(root)} is not a git repository, so "
                           "the files it changed there were not recorded")
                continue
            with self._serial():
                tree = self._trees.pop(root, None)  # not the work tree's state while it runs
                if tree is None:
                    try:
                        tree = git.tree()
                    except (SnapshotError, OSError, ValueError) as exc:
                        self._note(f"the files {name} changed could not be recorded ({exc})")
                        continue
                before[root] = tree
        return before

    def after_command(self, name, before):
        with self._serial():
            self._running -= 1
            for root, tree in (before or {}).items():
                self._after(name, root, tree)

    def _serial(self):
        if self._lock is None:
            self._lock = Semaphore()
        return self._lock

    def _after(self, name, root, before):
        git = self._gits[root]
        try:
            after = git.tree()
            changed = [c for c in git.changes(before, after) if c[0] not in self.paths]
            blobs = git.blobs([blob for _p, mode, blob in changed if mode != "000000"])
        except (SnapshotError, OSError, ValueError) as exc:
            self._trees.pop(root, None)
            self._note(f"the files {name} changed could not be recorded ({exc})")
            return
        if not self._running:  # else others still change it
            self._trees[root] = after
        for path, mode, blob in changed:
            if mode == "000000":
                self._put(path, "absent", None, b"")
            elif mode == "160000":
                self._put(path, "unrecorded", None, b"", "it is a nested git repository")
            elif blob not in blobs:
                self._put(path, "unrecorded", None, b"", "its snapshot was lost")
            elif mode == "120000":
                self._put(path, "link", None, blobs[blob])
            else:
                self._put(path, "file", int(mode[-3:], 8), blobs[blob])

    def _note(self, text):
        if text not in self.notes:
            self.notes.append(text)

    # ------------------------------------------------------------ size
    def _bound(self):
        """Drop the contents of the session's oldest turns past the size limit; the git
        snapshots of ours are dropped (and started again) past it too."""
        sid = self.session.id
        total = 0
        for turn, size in self.store.turns.sizes(sid):
            total += size or 0
            if total > self.limit:
                self.store.turns.drop_contents(sid, turn, (
                    f"its checkpoint was dropped to keep the session's checkpoints under "
                    f"{self.limit // 2**20} MiB"))
        for git in (self._gits or {}).values():
            if git is not None and git.size() > self.limit:
                git.drop()
