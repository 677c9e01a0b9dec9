"""Where an MCP server's sign-in is kept: one file per server URL in the data directory.

``<data dir>/mcp-auth/<sha256 of the URL>.json``, the folder 0700 and each file 0600 from
its first byte, replaced atomically (a temp file beside it, ``os.replace``): a reader sees
the old sign-in or the new one, never half of either. The file holds the server's URL, the
authorization server's endpoints, the registered client and the tokens; nothing of it goes
to the store, the log or the editor (the URL only as ``safe_url``). A file that cannot be
read is treated as no sign-in (and replaced by the next one).
"""

import hashlib
import json
import logging
import os
import time

from term2acp.core import private

log = logging.getLogger(__name__)

FOLDER = "mcp-auth"


def path_for(data_dir, url):
    digest = hashlib.sha256(url.encode()).hexdigest()[:32]
    return os.path.join(data_dir, FOLDER, f"{digest}.json")


def load(data_dir, url):
    """The stored sign-in of ``url`` (a dict), or None."""
    if not data_dir:
        return None
    try:
        with open(path_for(data_dir, url), encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("ignoring an unreadable MCP sign-in file: %s", type(exc).__name__)
        return None
    if not isinstance(data, dict) or data.get("url") != url:
        return None
    return data


def save(data_dir, url, data):
    """Replace the sign-in of ``url`` with ``data`` (the URL is added)."""
    if not data_dir:
        return
    path = path_for(data_dir, url)
    private.make_dirs(os.path.dirname(path))
    os.chmod(os.path.dirname(path), 0o700)  # one an older version made otherwise
    private.replace(path, json.dumps({**data, "url": url, "saved_at": time.time()}))


def delete(data_dir, url):
    """Forget the sign-in of ``url``; True when there was one."""
    if not data_dir:
        return False
    try:
        os.unlink(path_for(data_dir, url))
    except FileNotFoundError:
        return False
    return True
