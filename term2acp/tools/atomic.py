"""The atomic write behind the editing tools: a whole new file in one rename, or nothing.

The new bytes go to a temp file created (O_EXCL) in the target's directory, fsynced, then
renamed over the target (``os.replace``), or hard-linked to its name when the target must
not exist yet, so a file that appeared meanwhile is never clobbered. The directory is
reached by opening every directory on the way with O_NOFOLLOW, creating missing ones
relative to the fd of their parent, and checking with the kernel that the directory it
holds is the one that was allowed, so a symlink swapped in after the approval check writes
nothing. A failed write leaves the target as it was and removes the temp file.
"""

import errno
import logging
import os
import secrets
import stat

from term2acp.tools.base import ToolError
from term2acp.tools.paths import display_path, same_place

log = logging.getLogger(__name__)

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def write_atomically(ctx, real, data, exclusive):
    """Put ``data`` at ``real`` in one step; ``exclusive`` refuses when ``real`` exists."""
    parent, name = os.path.split(real)
    dfd = _open_dirs(ctx, parent)
    try:
        _replace_at(ctx, dfd, name, data, exclusive, real)
    finally:
        os.close(dfd)


def _open_dirs(ctx, parent):
    """An fd on ``parent``, creating missing directories fd-relative, verified by the kernel."""
    base, missing = parent, []
    while not os.path.lexists(base):
        base, tail = os.path.split(base)
        missing.append(tail)
    try:
        fd = os.open(base, _DIR_FLAGS)
    except OSError as exc:
        shown = display_path(ctx, base)
        raise ToolError(f"cannot write into {shown}: {_why(exc, base)}") from None
    try:
        for name in reversed(missing):
            try:
                os.mkdir(name, 0o777, dir_fd=fd)
            except FileExistsError:
                pass
            child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
        if not same_place(fd, parent):
            raise ToolError(f"{display_path(ctx, parent)} changed while being opened (a symlink "
                            "was swapped in?). Nothing was written; call the tool again.")
    except OSError as exc:
        os.close(fd)
        raise ToolError(f"cannot create {display_path(ctx, parent)}: {_why(exc)}") from None
    except ToolError:
        os.close(fd)
        raise
    return fd


def _why(exc, path=None):
    if exc.errno == errno.ELOOP or path and os.path.islink(path):
        return "a symlink was swapped in after the path was checked; nothing was written"
    if exc.errno == errno.ENOTDIR:
        return "a part of the path is a file, not a directory"
    return exc.strerror or str(exc)


def _replace_at(ctx, dfd, name, data, exclusive, real):
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        st = None
    if st is not None and exclusive:
        raise ToolError(f"{display_path(ctx, real)} appeared while writing; nothing was written.")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise ToolError(f"{display_path(ctx, real)} is no longer a regular file (a symlink was "
                        "swapped in?); nothing was written.")
    tmp = f".{name[:200]}.{secrets.token_hex(4)}.tmp"
    try:
        _write_new(dfd, tmp, data, stat.S_IMODE(st.st_mode) if st else None)
    except OSError as exc:
        raise ToolError(f"could not write {display_path(ctx, real)}: {_why(exc)}") from None
    try:
        if exclusive:
            os.link(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        else:
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except FileExistsError:
        raise ToolError(f"{display_path(ctx, real)} appeared while writing; nothing was "
                        "written.") from None
    except OSError as exc:
        raise ToolError(f"could not write {display_path(ctx, real)}: {_why(exc)}") from None
    finally:
        _unlink_quietly(dfd, tmp)


def _write_new(dfd, name, data, mode):
    """Create ``name`` (which must not exist) with ``data``; removed again on any failure."""
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o666, dir_fd=dfd)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        _unlink_quietly(dfd, name)
        raise
    finally:
        os.close(fd)


def _unlink_quietly(dfd, name):
    try:
        os.unlink(name, dir_fd=dfd)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("could not remove temp file %s: %s", name, exc)
