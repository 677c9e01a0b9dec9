"""Finding what the sandbox must mask on the host: root-only entries of /etc, and unix
sockets and FIFOs near the top of the read-only trees (``view.py`` decides where).

Both scans run once per cached view, never per command. ``/etc`` is small (about a
thousand entries) and walked whole; a toolchain can hold a hundred thousand files, so only
its top ``SCAN_DEPTH`` levels are searched (runtime sockets live near the top: ``~/.local/
share/<app>/...``), without a ``stat`` for regular files, and every walk stops after
``SCAN_BUDGET`` entries.
"""

import logging
import os
import stat
import time

from term2acp.core.pacing import breathe

log = logging.getLogger(__name__)

ROOT_ONLY = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers",
             "/etc/sudoers.d")  # masked even if a distribution made them world-readable
SCAN_DEPTH = 4  # levels below a read-only tree searched for sockets and FIFOs
SCAN_BUDGET = 50_000  # directory entries per walk, so a huge tree cannot stall a command
YIELD_EVERY = 2_000  # entries between yields to the hub: a walk never starves the agent
TTL = 60.0  # seconds a scan's result is reused (by every workspace that shows the tree)

_results = {}


def cached(kind, top):
    """``etc_masks()`` or ``special_files(top)``, reused for ``TTL`` seconds."""
    key = (kind, top)
    made, value = _results.get(key, (None, None))
    if made is None or time.monotonic() - made > TTL:
        value = etc_masks() if kind == "etc" else special_files(top)
        if len(_results) > 256:
            _results.clear()
        _results[key] = (time.monotonic(), value)
    return list(value)


def clear_cache():
    _results.clear()


def etc_masks():
    """Entries of /etc the sandbox could read but others cannot, plus sockets and FIFOs."""
    found = [p for p in ROOT_ONLY if os.path.lexists(p) and os.access(p, os.R_OK)]
    for path, mode in _walk("/etc", depth=None, files=True):
        if stat.S_ISDIR(mode):
            closed = not mode & stat.S_IXOTH  # _walk does not enter it
            if closed and os.access(path, os.R_OK | os.X_OK):
                found.append(path)
        elif not stat.S_ISREG(mode):
            found.append(path)  # a socket, FIFO or device node
        elif not mode & stat.S_IROTH and os.access(path, os.R_OK) and _has_content(path):
            found.append(path)  # (an empty one, e.g. a lock file, reveals nothing: no mount)
    return sorted(set(found))


def _has_content(path):
    try:
        return os.lstat(path).st_size > 0
    except OSError:
        return False


def special_files(top):
    """Unix sockets and FIFOs in the top ``SCAN_DEPTH`` levels of ``top``."""
    return [path for path, mode in _walk(top, depth=SCAN_DEPTH, files=False)
            if stat.S_ISSOCK(mode) or stat.S_ISFIFO(mode)]


def _walk(top, depth, files):
    """``(path, lstat mode)`` below ``top`` down to ``depth`` levels (None: all): every
    directory and special file, and regular files too when ``files``. Links are not
    followed. Without ``files`` (a socket scan) every directory is entered; with it (the
    /etc scan) directories closed to others are masked whole, so not entered."""
    stack, seen = [(top, 0)], 0
    while stack:
        folder, level = stack.pop()
        try:
            entries = os.scandir(folder)
        except OSError:
            continue
        with entries:
            for entry in entries:
                seen += 1
                if seen % YIELD_EVERY == 0:
                    breathe()  # let the hub poll I/O too (core/pacing.py)
                if seen > SCAN_BUDGET:
                    log.warning("sandbox: stopped scanning %s after %d entries", top, seen)
                    return
                if entry.is_symlink() or (not files and entry.is_file(follow_symlinks=False)):
                    continue
                try:
                    mode = entry.stat(follow_symlinks=False).st_mode
                except OSError:
                    continue
                yield entry.path, mode
                enter = stat.S_ISDIR(mode) and (not files or mode & stat.S_IXOTH)
                if enter and (depth is None or level + 1 < depth):
                    stack.append((entry.path, level + 1))
