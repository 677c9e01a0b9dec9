"""The session as recorded for export (``term2acp sessions export``, the pytest export).

Three kinds of rows in the store's ``recording`` table, written with the session's other
writes (no extra commit):

* ``reply``: each model reply as it arrived, its steps in the scripted provider's format
  (``providers/scripted.py``: thought, text, tool calls with their ids, usage, stop), with
  the model, the usage and the cost;
* ``permission``: each question the turn asked, its options and the answer;
* ``file``: each file a tool call named (read, searched, changed) as it was the first time
  the session touched it, so an export can rebuild the starting workspace. The pending
  report of a call comes before it runs, so a changed file is taken before the change.
  Credential files (``core/sensitive.py``) are named, never copied; big files are named.
"""

import json
import logging
import os
import stat

from term2acp.core.sensitive import is_sensitive

log = logging.getLogger(__name__)

MAX_FILE_BYTES = 2 * 2**20  # a bigger file is named, not copied
_INSERT = ("INSERT INTO recording (session_id, seq, kind, turn, payload, content) VALUES (?,"
           " (SELECT COALESCE(MAX(seq), 0) + 1 FROM recording WHERE session_id = ?), ?, ?, ?, ?)")


class Recording:
    def __init__(self, store, session_id, root):
        self.store = store
        self.sid = session_id
        self.root = root
        self._seen = None  # relative paths recorded so far (read from the store once)

    def _put(self, kind, turn, payload, content=None):
        self.store.write(_INSERT, (self.sid, self.sid, kind, turn,
                                   json.dumps(payload, ensure_ascii=False), content), self.sid)

    def reply(self, turn, payload):
        """A model reply: ``payload`` has ``steps`` (scripted format), ``model``,
        ``usage`` and ``cost``."""
        self._put("reply", turn, payload)

    def permission(self, turn, payload):
        self._put("permission", turn, payload)

    def touched(self, turn, locations):
        """A tool call reported ``locations``: record each path not recorded before."""
        if self._seen is None:
            rows = self.store.rows("SELECT payload FROM recording WHERE session_id = ? AND"
                                   " kind = 'file'", (self.sid,))
            self._seen = {json.loads(payload).get("path") for (payload,) in rows}
        for location in locations:
            path = location.get("path") if isinstance(location, dict) else None
            if not path:
                continue
            rel = os.path.relpath(path, self.root) if os.path.isabs(path) else path
            if rel in self._seen or rel == ".." or rel.startswith("../"):
                continue
            self._seen.add(rel)
            try:
                state, mode, content, why = _state_of(os.path.join(self.root, rel))
            except Exception:  # noqa: BLE001 - recording never fails a tool call
                log.debug("recording %s failed", rel, exc_info=True)
                continue
            payload = {"path": rel, "state": state}
            if mode is not None:
                payload["mode"] = mode
            if why:
                payload["why"] = why
            self._put("file", turn, payload, content)


def _state_of(path):
    """``(state, mode, content, why)`` of what is at ``path`` now."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "absent", None, None, None
    except OSError as exc:
        return "unrecorded", None, None, f"it could not be read ({exc.strerror})"
    if stat.S_ISDIR(st.st_mode):
        return "dir", None, None, None
    if is_sensitive(os.path.realpath(path)):
        return "unrecorded", None, None, "a credential file, of which term2 keeps no copy"
    if stat.S_ISLNK(st.st_mode):
        return "link", None, os.fsencode(os.readlink(path)), None
    if not stat.S_ISREG(st.st_mode):
        return "unrecorded", None, None, "not a regular file"
    if st.st_size > MAX_FILE_BYTES:
        return "unrecorded", None, None, f"larger than {MAX_FILE_BYTES // 2**20} MiB"
    with open(path, "rb") as fh:
        return "file", stat.S_IMODE(st.st_mode), fh.read(MAX_FILE_BYTES + 1), None
