"""The atomic write behind the editing tools: a whole new file in one rename, or nothing.

The new bytes go to a temp file created (O_EXCL) in the target's directory, fsynced, then
renamed over the target (``os.replace``), or hard-linked to its name when the target must
not exist yet, so a file that appeared meanwhile is never clobbered; a target that is no
longer the file the caller read (``seen``) is not replaced either. The directory is
reached by opening the deepest existing directory and then each missing one (created
relative to the fd of its parent) with O_NOFOLLOW, checking each fd with the kernel as it
is opened (:func:`term2acp.tools.paths.open_checked`), before anything is created in it,
so a symlink swapped in after the approval check creates and writes nothing. A failed
write leaves the target as it was and removes the temp file.
"""

import errno
import logging
import os
import secrets
import stat

from term2acp.core import offhub
from term2acp.tools.base import ToolError, changed_since_read, identity
from term2acp.tools.paths import DIR_FLAGS, PathMoved, display_path, open_checked

log = logging.getLogger(__name__)


def write_atomically(ctx, real, data, exclusive, seen=None):
    """Put ``data`` (bytes, or a list of pieces) at ``real`` in one step; ``exclusive``
    refuses when ``real`` exists, and ``seen`` (``base.identity`` of the file read) when
    ``real`` is another file now."""
    parent, name = os.path.split(real)
    ctx.before_write(real)  # the turn's checkpoint: what the file is now
    dfd = open_dirs(ctx, parent)
    try:
        _replace_at(ctx, dfd, name, data, exclusive, real, seen)
    finally:
        os.close(dfd)


def open_dirs(ctx, parent):
    """An fd on ``parent``, creating missing directories fd-relative. Every directory is
    checked with the kernel as it is opened, before anything is created inside it, so a
    swapped path component never gets a directory created outside."""
    base, missing = parent, []
    while not os.path.lexists(base):
        base, tail = os.path.split(base)
        missing.append(tail)
    try:
        fd = open_checked(base, DIR_FLAGS)
    except PathMoved:
        raise _moved(ctx, parent) from None
    except OSError as exc:
        shown = display_path(ctx, base)
        raise ToolError(f"cannot write into {shown}: {_why(exc, base)}") from None
    try:
        for name in reversed(missing):
            try:
                os.mkdir(name, 0o777, dir_fd=fd)
            except FileExistsError:
                pass
            base = os.path.join(base, name)
            child = open_checked(base, DIR_FLAGS, fd)
            os.close(fd)
            fd = child
    except PathMoved:
        os.close(fd)
        raise _moved(ctx, parent) from None
    except OSError as exc:
        os.close(fd)
        raise ToolError(f"cannot create {display_path(ctx, parent)}: {_why(exc)}") from None
    return fd


def _moved(ctx, parent):
    return ToolError(f"{display_path(ctx, parent)} changed while being opened (a symlink was "
                     "swapped in?). Nothing was written; call the tool again.")


def _why(exc, path=None):
    if exc.errno == errno.ELOOP or path and os.path.islink(path):
        return "a symlink was swapped in after the path was checked; nothing was written"
    if exc.errno == errno.ENOTDIR:
        return "a part of the path is a file, not a directory"
    return exc.strerror or str(exc)


def _replace_at(ctx, dfd, name, data, exclusive, real, seen):
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        st = None
    if st is not None and exclusive:
        raise ToolError(f"{display_path(ctx, real)} appeared while writing; nothing was written.")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise ToolError(f"{display_path(ctx, real)} is no longer a regular file (a symlink was "
                        "swapped in?); nothing was written.")
    if seen is not None and identity(st) != seen:
        raise ToolError(changed_since_read(display_path(ctx, real)))
    tmp = f".{name[:200]}.{secrets.token_hex(4)}.tmp"
    try:
        _write_new(dfd, tmp, data, stat.S_IMODE(st.st_mode) if st else None)
    except OSError as exc:
        raise ToolError(f"could not write {display_path(ctx, real)}: {_why(exc)}") from None
    try:
        if exclusive:
            os.link(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        else:
            # the file replaced is freed in the call: a big one's pages, off the hub
            offhub.heavy(st.st_size if st else 0, _replace, dfd, tmp, name)
    except FileExistsError:
        raise ToolError(f"{display_path(ctx, real)} appeared while writing; nothing was "
                        "written.") from None
    except OSError as exc:
        raise ToolError(f"could not write {display_path(ctx, real)}: {_why(exc)}") from None
    finally:
        _unlink_quietly(dfd, tmp)


def _write_new(dfd, name, data, mode):
    """Create ``name`` (which must not exist) with ``data`` (bytes, or a list of bytes-like
    pieces written one after the other); removed again on any failure."""
    pieces = data if isinstance(data, list) else [data]
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o666, dir_fd=dfd)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        offhub.heavy(sum(map(len, pieces)), _fill, fd, pieces)
    except BaseException:
        _unlink_quietly(dfd, name)
        raise
    finally:
        os.close(fd)


def _fill(fd, pieces):
    """Write ``pieces`` to ``fd`` and flush it to the disk (a big file's in a thread)."""
    for piece in pieces:
        view = memoryview(piece)
        while view:
            view = view[os.write(fd, view):]
    os.fsync(fd)


def _replace(dfd, source, target):
    os.replace(source, target, src_dir_fd=dfd, dst_dir_fd=dfd)


def _unlink(dfd, name):
    os.unlink(name, dir_fd=dfd)


def _unlink_quietly(dfd, name):
    """Remove ``name`` if it is there (a big file's pages are freed off the hub)."""
    try:
        size = os.stat(name, dir_fd=dfd, follow_symlinks=False).st_size
        offhub.heavy(size, _unlink, dfd, name)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("could not remove temp file %s: %s", name, exc)
