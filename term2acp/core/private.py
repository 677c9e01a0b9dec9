"""Our files are the user's alone: every folder the agent makes for its data is 0700 and
every file 0600, whatever the umask, and a folder or file of ours that an older version
left readable by others is tightened, with a notice on stderr.

``os.makedirs(path, mode=0o700)`` only gives the last folder that mode (the ones above it
get the umask's 0755), and SQLite creates its files with the umask's 0644, so the callers
go through here: ``make_dirs`` for folders, ``create_file`` / ``open_file`` for files.
"""

import logging
import os
import stat

log = logging.getLogger(__name__)

DIR_MODE = 0o700
FILE_MODE = 0o600


def make_dirs(path):
    """Make ``path`` and each missing folder above it, each 0700; returns ``path``."""
    missing, here = [], os.path.abspath(path)
    while not os.path.lexists(here):
        missing.append(here)
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, DIR_MODE)
        except FileExistsError:
            continue
        os.chmod(folder, DIR_MODE)  # the umask may have taken more
    return path


def create_file(path):
    """Make sure ``path`` exists as a 0600 file of ours (an existing one is tightened)."""
    os.close(open_file(path, os.O_RDWR | os.O_CREAT))
    return path


def open_file(path, flags, mode=FILE_MODE):
    """``os.open`` of a private file: created ``mode``, an existing one tightened."""
    fd = os.open(path, flags | os.O_CLOEXEC, mode)
    try:
        st = os.fstat(fd)
        if st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) & 0o077:
            os.fchmod(fd, stat.S_IMODE(st.st_mode) & ~0o077)
            _notice(path, st.st_mode)
    except OSError:
        pass
    return fd


def replace(path, text):
    """Replace the file ``path`` with ``text`` at once: written to a new 0600 file beside it
    (never through a link), synced, then renamed over it; nothing is left on a failure.
    The folders are made as ``make_dirs`` makes them."""
    folder = os.path.dirname(path) or "."
    make_dirs(folder)
    temporary = os.path.join(folder, f".{os.path.basename(path)}.{os.urandom(6).hex()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 FILE_MODE)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def tighten(*paths):
    """Take group and other access away from each existing path of ours (folders and
    files; links are left alone), saying so on stderr."""
    for path in paths:
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISLNK(st.st_mode) or st.st_uid != os.getuid():
            continue
        if stat.S_IMODE(st.st_mode) & 0o077:
            try:
                os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o077)
            except OSError as exc:
                log.warning("%s is readable by other users and could not be made private: "
                            "%s", path, exc)
                continue
            _notice(path, st.st_mode)


def _notice(path, mode):
    kind = "folder" if stat.S_ISDIR(mode) else "file"
    log.warning("the %s %s was readable by other users (mode %o); made private to you",
                kind, path, stat.S_IMODE(mode))
