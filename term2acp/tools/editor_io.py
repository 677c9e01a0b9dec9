"""A tool's file I/O through the editor (ACP v1 ``fs/read_text_file`` and
``fs/write_text_file``), when the client offers it: the editor then shows and tracks the
change and reads see its unsaved buffer. Only after the tools' own path policy has
resolved and approved the target, and only where no sandboxed process could swap the
path under the editor (:func:`_delegates`); otherwise the tools' own fd-checked I/O is
used. ``ctx`` is the call's ``ToolContext``, whose ``editor`` is the session's."""

import io
import os
import stat

from term2acp.tools import atomic
from term2acp.tools.base import ToolError, changed_since_read, identity


def _inside(ctx, real):
    root = ctx.root.rstrip(os.sep)
    return real == root or real.startswith(root + os.sep)


def _delegates(ctx, real, can):
    """Whether I/O on ``real`` may go through the editor. The editor opens the *path*
    it is given and follows symlinks, so only while no sandboxed process is alive (one
    could swap the path for a symlink during the call; nested calls from run_code are
    always inside one) and only inside the root; otherwise the tools' own fd-checked
    I/O is used."""
    if ctx.editor is None or not can(ctx.editor) or not _inside(ctx, real):
        return False
    from term2acp import sandbox  # loaded with the tools that call us

    return not sandbox.alive()


def read_via_editor(ctx, real, local):
    """What the final read of ``real`` reads from: ``local`` (an open binary file that
    passed the tools' checks) unless the editor serves reads (ACP ``fs/read_text_file``),
    ``real`` is inside the root and may be delegated (:func:`_delegates`); then the
    editor's text, unsaved changes included, once ``real`` is shown to still be the
    file ``local`` holds after the editor answered."""
    if not _delegates(ctx, real, lambda editor: editor.can_read):
        return local
    before = os.fstat(local.fileno())
    text = ctx.editor.read_text(real)
    if not _still(real, before):
        raise ToolError(f"{real} changed while the editor read it (something was swapped "
                        "in); nothing was read. Try again.")
    return io.BytesIO(text.encode("utf-8"))


def editor_writes(ctx, real):
    """True when :func:`write_via_editor` would write ``real`` through the editor."""
    return _delegates(ctx, real, lambda editor: editor.can_write)


def write_via_editor(ctx, real, text, exclusive, seen=None):
    """Write ``text`` through the editor (ACP ``fs/write_text_file``) so it shows and
    tracks the change; False when the write must be local instead (see
    :func:`_delegates`). Called after the path policy and approvals; the target must be
    a regular file or absent, under directories inside the root reached fd by fd with
    no symlink on the way (missing ones are created fd-relative, as the atomic writer
    does), and still the file ``seen`` (see :func:`identity`) when given. After the
    editor answers, the directory and the target are checked again."""
    if not _delegates(ctx, real, lambda editor: editor.can_write):
        return False
    parent, name = os.path.split(real)
    dfd = atomic.open_dirs(ctx, parent)
    try:
        st = _stat_at(dfd, name)
        if st is not None and exclusive:
            raise ToolError(f"{real} appeared while writing; nothing was written.")
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise ToolError(f"{real} is no longer a regular file; nothing was written.")
        if seen is not None and identity(st) != seen:
            raise ToolError(changed_since_read(real))
        ctx.before_write(real)  # the turn's checkpoint: what the file is now
        ctx.editor.write_text(real, text)
        after = _stat_at(dfd, name)
        if not _still(parent, os.fstat(dfd)) or (
                after is not None and not stat.S_ISREG(after.st_mode)):
            raise ToolError(f"{real} or its directory was swapped while the editor saved "
                            "it: the editor may have written elsewhere through a symlink. "
                            "Check the file and call the tool again.")
    finally:
        os.close(dfd)
    return True


def _still(path, held):
    """Whether ``path`` (canonical) names, without a symlink on the way, the file ``held``
    (an ``os.stat_result`` of an fd we hold)."""
    try:
        now = os.lstat(path)
    except OSError:
        return False
    return ((now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)
            and os.path.realpath(path) == path)


def _stat_at(dfd, name):
    try:
        return os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ToolError(f"cannot write {name}: {exc.strerror}") from None
