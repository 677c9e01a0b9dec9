"""File changes that land together or not at all (what one ``apply_patch`` call writes).

Each change is staged first, in its own directory reached as :mod:`term2acp.tools.atomic`
reaches it (fd by fd, O_NOFOLLOW, each fd checked with the kernel): a write puts its new
bytes in a synced temp file beside the target, a deletion only opens the directory.
Nothing is visible yet, and any failure while staging removes the temp files.

Then every change is committed by renames in its directory: the file being replaced or
deleted is first kept under a hidden backup name (a hard link, or a rename for a
deletion), then the temp file takes its name. Before each commit the target must still
be the file that was read (``seen``) or still absent. If a later commit fails, the ones
already done are undone from their backups, in reverse order, so the tree is as it was;
once all are done the backups are removed. A crash between two commits can leave the
backup files (``.<name>.<hex>.bak``) beside their targets, never a half-written file.
"""

import os
import secrets
import stat

from term2acp.core import offhub
from term2acp.tools.atomic import _unlink_quietly, _why, _write_new, open_dirs
from term2acp.tools.base import ToolError, changed_since_read, identity
from term2acp.tools.paths import display_path


def _hidden(name, suffix):
    return f".{name[:200]}.{secrets.token_hex(4)}.{suffix}"


class _Change:
    """One staged change of ``real`` in the directory fd ``dfd`` (owned)."""

    def __init__(self, ctx, real, seen, data=None):
        self.ctx, self.real, self.seen = ctx, real, seen
        self.data = data  # None: a deletion
        parent, self.name = os.path.split(real)
        self.dfd = open_dirs(ctx, parent)
        self.tmp = self.backup = None
        self.done = False

    @property
    def shown(self):
        return display_path(self.ctx, self.real)

    def stage(self):
        self._check()
        if self.data is None:
            return
        self.tmp = _hidden(self.name, "tmp")
        mode = None
        if self.seen is not None:
            st = os.stat(self.name, dir_fd=self.dfd, follow_symlinks=False)
            mode = stat.S_IMODE(st.st_mode)
        try:
            _write_new(self.dfd, self.tmp, self.data, mode)
        except OSError as exc:
            self.tmp = None
            raise ToolError(f"could not write {self.shown}: {_why(exc)}") from None

    def _check(self):
        """The target is still what was read: the same file, or still absent."""
        try:
            st = os.stat(self.name, dir_fd=self.dfd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise ToolError(f"{self.shown} is no longer a regular file (a symlink was swapped "
                            "in?); nothing was written.")
        if self.seen is None and st is not None:
            raise ToolError(f"{self.shown} appeared while the patch was applied; nothing was "
                            "written.")
        if self.seen is not None and identity(st) != self.seen:
            raise ToolError(changed_since_read(self.shown))

    def commit(self):
        self._check()
        dfd = self.dfd
        if self.seen is not None:
            self.backup = _hidden(self.name, "bak")
            if self.data is None:
                os.rename(self.name, self.backup, src_dir_fd=dfd, dst_dir_fd=dfd)
            else:
                os.link(self.name, self.backup, src_dir_fd=dfd, dst_dir_fd=dfd)
        if self.data is not None:
            if self.seen is None:
                os.link(self.tmp, self.name, src_dir_fd=dfd, dst_dir_fd=dfd)
            else:
                os.replace(self.tmp, self.name, src_dir_fd=dfd, dst_dir_fd=dfd)
        self.done = True

    def undo(self):
        dfd = self.dfd
        if self.backup is not None:
            os.replace(self.backup, self.name, src_dir_fd=dfd, dst_dir_fd=dfd)
            self.backup = None
        elif self.done:
            os.unlink(self.name, dir_fd=dfd)
        self.done = False

    def close(self):
        for name in (self.tmp, self.backup):
            if name is not None:
                _unlink_quietly(self.dfd, name)
        self.tmp = self.backup = None
        if self.dfd is not None:
            os.close(self.dfd)
            self.dfd = None


class ChangeSet:
    """Writes and deletions staged with :meth:`write` and :meth:`delete`, then
    :meth:`commit` ed together (see the module docstring); use it as a context manager so
    whatever was staged and not committed is cleaned up."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.changes = []

    def write(self, real, text, seen):
        """Stage ``text`` (or a big file's bytes as a list of pieces) for ``real``; ``seen``
        is the identity of the file read (None: the file must not exist)."""
        data = text if isinstance(text, list) else offhub.heavy(len(text), offhub.encode, text)
        change = _Change(self.ctx, real, seen, data)
        self.changes.append(change)
        change.stage()

    def delete(self, real, seen):
        change = _Change(self.ctx, real, seen)
        self.changes.append(change)
        change.stage()

    def commit(self):
        for change in self.changes:  # the turn's checkpoint: what each file is now (/undo)
            self.ctx.before_write(change.real)
        done = []
        try:
            for change in self.changes:
                change.commit()
                done.append(change)
        except BaseException as exc:
            self._undo(done)
            if isinstance(exc, OSError):
                raise ToolError(f"could not write {change.shown}: {_why(exc)}; nothing was "
                                "changed.") from None
            if isinstance(exc, ToolError):
                raise ToolError(f"{exc} Nothing of the patch was applied.") from None
            raise

    def _undo(self, done):
        failed = []
        for change in reversed(done):
            try:
                change.undo()
            except OSError:
                failed.append(change.shown)
                change.backup = None  # kept on disk: the only copy of the old file
        if failed:
            raise ToolError(f"a write failed and {', '.join(failed)} could not be restored from "
                            "its backup beside it (.<name>.<hex>.bak); check them.")

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        for change in self.changes:
            change.close()
