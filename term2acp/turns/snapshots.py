"""Snapshots of a git workspace around commands, in a repository of our own.

What a shell command changed cannot be known before it runs, so before a command that may
change files (in a workspace inside a git repository) the whole tree is snapshotted, and
again after it; the difference names every file the command created, changed or deleted,
and the first snapshot holds what each was before.

The user's repository is never touched: ``GIT_DIR`` is a private bare repository in our
data directory (objects, index and config of our own), ``GIT_WORK_TREE`` the session
root. No branch, index, stash, ref, hook or object of theirs is read or written, so
``git status``, the branch and the index stay exactly as the user left them. Their
``.gitignore`` files apply (they are in the work tree) and so does ``info/exclude`` of
their repository; their config does not: no hook, filter, fsmonitor or alias of a
repository the model can write to runs in our process. The index of our own keeps the
stat data of the last snapshot, so a later snapshot only hashes the files that changed.

The first snapshot of a session starts from a copy of the user's index when the root is
their work tree (read, never written), with their object store as a read-only alternate:
only files that differ from their index are hashed and written (ours), instead of every
file. Entries marked assume-unchanged or skip-worktree would hide changes, so an index
with any starts nothing (every file is hashed). A snapshot that fails (say, their objects
were pruned since) starts our repository again once.
"""

import contextlib
import logging
import os
import shutil


from term2acp.core import private

log = logging.getLogger(__name__)

TIMEOUT = 30.0  # seconds one git call may take (a snapshot of a huge tree gives up)
EMPTY = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's empty tree


class SnapshotError(Exception):
    """A snapshot could not be taken; the message says why (for the /undo report)."""


def repository_of(root):
    """The ``.git`` entry of the repository ``root`` is in, or None (not a git workspace)."""
    path = root
    while True:
        candidate = os.path.join(path, ".git")
        if os.path.exists(candidate):
            return candidate
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def _gitdir(dotgit):
    """The user's git directory (``.git`` may be a file naming it), or None."""
    if not os.path.isfile(dotgit):
        return dotgit
    try:
        with open(dotgit, encoding="utf-8") as fh:
            line = fh.readline().strip()
    except OSError:
        return None
    if not line.startswith("gitdir:"):
        return None
    return os.path.join(os.path.dirname(dotgit), line[len("gitdir:"):].strip())


def _common(gitdir):
    """Where a (linked work tree's) git directory keeps the objects."""
    try:
        with open(os.path.join(gitdir, "commondir"), encoding="utf-8") as fh:
            return os.path.normpath(os.path.join(gitdir, fh.read().strip()))
    except OSError:
        return gitdir


def _user_exclude(gitdir):
    """``info/exclude`` of the user's repository, if there is one."""
    if gitdir is None:
        return None
    exclude = os.path.join(_common(gitdir), "info", "exclude")
    return exclude if os.path.isfile(exclude) else None


class GitSnapshots:
    """Snapshots of ``root`` kept in ``private`` (a directory of ours, made on first use)."""

    def __init__(self, root, private, dotgit):
        self.root = root
        self.private = private
        gitdir = _gitdir(dotgit)
        self.exclude = _user_exclude(gitdir)
        # their index and objects, read only: when the root is their work tree
        self.seed = gitdir if gitdir and os.path.dirname(dotgit) == root else None
        self._ready = False

    def _env(self, bare=False):
        env = {} if bare else {"GIT_DIR": self.private, "GIT_WORK_TREE": self.root,
                               "GIT_INDEX_FILE": os.path.join(self.private, "index")}
        env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
               "HOME": self.private, "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0",
               "LC_ALL": "C", "PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        return env

    def _git(self, *args, stdin=None, bare=False):
        from term2acp.sandbox import process  # with the sandbox, which prompts have loaded
        from term2acp.sandbox.capture import capture

        try:
            exit, out, err = capture(
                ["git", "-c", "core.autocrlf=false", "-c", "core.safecrlf=false",
                 "-c", "core.fsmonitor=false", "-c", "core.untrackedCache=false",
                 "-c", "gc.auto=0", "-c", "core.quotePath=false",
                 *(("-c", f"core.excludesFile={self.exclude}") if self.exclude else ()),
                 *args],
                cwd=self.private if bare else self.root, env=self._env(bare), data=stdin,
                timeout=TIMEOUT)
        except process.ProcessTimeout:
            raise SnapshotError(f"git took longer than {TIMEOUT:g}s") from None
        except OSError as exc:  # process.LaunchError too
            raise SnapshotError(f"git could not run: {exc.strerror}") from None
        if exit != process.Exit(0, None):
            why = err.decode("utf-8", "replace").strip().splitlines()
            raise SnapshotError(f"git {args[0]} failed: "
                                f"{why[-1] if why else exit.exit_code or exit.signal}")
        return out

    def _prepare(self):
        if self._ready:
            return
        if not os.path.isdir(os.path.join(self.private, "objects")):
            private.make_dirs(self.private)
            self._git("init", "-q", "--bare", self.private, bare=True)
            self._git("config", "core.bare", "false", bare=True)
            if self.seed is not None:
                self._seed()
        self._ready = True

    def _seed(self):
        """Start from a copy of the user's index, their objects a read-only alternate."""
        index, objects = os.path.join(self.seed, "index"), os.path.join(_common(self.seed),
                                                                         "objects")
        ours = os.path.join(self.private, "index")
        if not os.path.isfile(index) or not os.path.isdir(objects):
            return
        try:
            shutil.copyfile(index, ours)
            with open(os.path.join(self.private, "objects", "info", "alternates"), "w",
                      encoding="utf-8") as fh:
                fh.write(objects + "\n")
            tags = self._git("ls-files", "-v", "-z").split(b"\0")
        except (OSError, SnapshotError):
            tags = [b"?"]
        if any(tag[:1] not in (b"H", b"") for tag in tags):  # hidden changes, or unreadable
            with contextlib.suppress(OSError):
                os.unlink(ours)

    def tree(self):
        """Snapshot the work tree now; returns the tree id."""
        try:
            return self._tree()
        except SnapshotError:
            if not self._ready:
                raise
            self.drop()  # start our repository again, once
            return self._tree()

    def _tree(self):
        self._prepare()
        self._git("add", "-A", "--ignore-errors", "--", ".")
        return self._git("write-tree").decode().strip()

    def changes(self, before, after):
        """``[(path, mode, blob)]`` of every file that differs between the two trees:
        ``mode``/``blob`` what it was in ``before`` (mode "000000": it did not exist)."""
        if before == after:
            return []
        raw = self._git("diff-tree", "-r", "-z", "--no-renames", before or EMPTY, after)
        parts = raw.split(b"\0")
        out = []
        for head, path in zip(parts[0::2], parts[1::2]):
            fields = head.decode().lstrip(":").split()
            if len(fields) < 5:
                continue
            old_mode, _new_mode, old_blob = fields[0], fields[1], fields[2]
            out.append((os.path.join(self.root, os.fsdecode(path)), old_mode, old_blob))
        return out

    def blobs(self, ids):
        """``{blob id: bytes}`` of ``ids`` (one ``cat-file --batch``)."""
        wanted = [i for i in dict.fromkeys(ids) if i and set(i) != {"0"}]
        if not wanted:
            return {}
        raw = self._git("cat-file", "--batch", stdin="".join(i + "\n" for i in wanted).encode())
        found, at = {}, 0
        while at < len(raw):
            end = raw.index(b"\n", at)
            header = raw[at:end].decode().split()
            at = end + 1
            if len(header) != 3:  # "<id> missing"
                continue
            size = int(header[2])
            found[header[0]] = raw[at:at + size]
            at += size + 1
        return found

    def size(self):
        """Bytes the private repository takes on disk."""
        total = 0
        for base, _dirs, files in os.walk(self.private):
            for name in files:
                try:
                    total += os.lstat(os.path.join(base, name)).st_size
                except OSError:
                    pass
        return total

    def drop(self):
        """Remove the private repository (the next snapshot starts it again)."""
        shutil.rmtree(self.private, ignore_errors=True)
        self._ready = False
