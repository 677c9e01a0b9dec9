"""The session as recorded for export (``term2acp sessions export``, the pytest export).

Three kinds of rows in the store's ``recording`` table, written with the session's other
writes (no extra commit):

* ``reply``: each model reply as it arrived, its steps in the scripted provider's format
  (``providers/scripted.py``: thought, text, tool calls with their ids, usage, stop), with
  the model, the usage and the cost;
* ``permission``: each question the turn asked, its options and the answer; ``outcome``:
  how each turn ended;
* ``file``: each file a tool call named (read, changed, or found by a search or a listing)
  as it was the first time the session touched it, so an export can rebuild the starting
  workspace. The pending report of a call comes before it runs, so a changed file is taken
  before the change.
  Credential files (``core/sensitive.py``) are named, never copied; so are files over 2 MiB
  and any once the session's copies pass 64 MiB.
"""

import json
import logging
import os
import stat

from term2acp.core.sensitive import is_sensitive

log = logging.getLogger(__name__)

MAX_FILE_BYTES = 2 * 2**20  # a bigger file is named, not copied
MAX_FOUND = 200  # files recorded of one search's result
MAX_SESSION_BYTES = 64 * 2**20  # file contents one session keeps; past it files are named


class Recording:
    def __init__(self, store, session_id, root):
        self.store = store
        self.sid = session_id
        self.root = root
        self._seen = None  # relative paths recorded so far (read from the store once)
        self._folders = {}  # call id -> the folders it searched or listed
        self._bytes = 0  # file contents recorded for this session

    def _put(self, kind, turn, payload, content=None):
        self.store.recording.add(self.sid, kind, turn, json.dumps(payload, ensure_ascii=False),
                                 content)

    def reply(self, turn, payload):
        """A model reply: ``payload`` has ``steps`` (scripted format), ``model``,
        ``usage`` and ``cost``."""
        self._put("reply", turn, payload)

    def permission(self, turn, payload):
        self._put("permission", turn, payload)

    def outcome(self, turn, reason, error=None):
        """How the turn ended (sessions/lifecycle.py's reasons)."""
        self._put("outcome", turn, {"reason": reason, "error": error})

    def observe(self, turn, event):
        """A tool call's report (``ToolCallReported``): the paths it names, and the files a
        search or listing of a folder found (the lines of its result that name one)."""
        if event.locations:
            folders = self.touched(turn, event.locations)
            if folders:
                self._folders[event.call_id] = folders
        if event.status in ("completed", "failed"):
            folders = self._folders.pop(event.call_id, None)
            if folders and event.content:
                self.touched(turn, [{"path": p} for p in _found(event.content, folders,
                                                                self.root)])

    def touched(self, turn, locations):
        """Record each path of ``locations`` not recorded before; returns the folders among
        them (relative)."""
        if self._seen is None:
            self._seen = {}
            for payload, size in self.store.recording.files(self.sid):
                item = json.loads(payload)
                self._seen[item.get("path")] = item.get("state")
                self._bytes += size or 0
        folders = []
        for location in locations:
            path = location.get("path") if isinstance(location, dict) else None
            if not path:
                continue
            rel = os.path.relpath(path, self.root) if os.path.isabs(path) else path
            if rel == ".." or rel.startswith("../"):
                continue
            if rel in self._seen:
                if self._seen[rel] == "dir":
                    folders.append(rel)
                continue
            try:
                state, mode, content, why = _state_of(os.path.join(self.root, rel),
                                                      MAX_SESSION_BYTES - self._bytes)
            except Exception:  # noqa: BLE001 - recording never fails a tool call
                log.debug("recording %s failed", rel, exc_info=True)
                continue
            self._seen[rel] = state
            if state == "dir":
                folders.append(rel)
            self._bytes += len(content or b"")
            payload = {"path": rel, "state": state}
            if mode is not None:
                payload["mode"] = mode
            if why:
                payload["why"] = why
            self._put("file", turn, payload, content)
        return folders


def _found(content, folders, root):
    """Files named at the start of a result's lines (``path:line: text``, ``path``, ``name
    (size)``), relative to the root or to a searched folder; at most MAX_FOUND."""
    found = []
    for item in content:
        text = item.get("text") if isinstance(item, dict) else None
        for line in (text or "").splitlines():
            name = line.split(":", 1)[0].split("  ", 1)[0].strip()
            if not name or os.path.isabs(name):
                continue
            for base in ("", *folders):
                rel = os.path.normpath(os.path.join(base, name))
                if os.path.isfile(os.path.join(root, rel)) and rel not in found:
                    found.append(rel)
                    break
            if len(found) >= MAX_FOUND:
                return found
    return found


def _state_of(path, room):
    """``(state, mode, content, why)`` of what is at ``path`` now; a file over ``room``
    bytes is named, not copied."""
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
    if st.st_size > room:
        return "unrecorded", None, None, (f"the session's recorded files passed "
                                          f"{MAX_SESSION_BYTES // 2**20} MiB")
    with open(path, "rb") as fh:
        return "file", stat.S_IMODE(st.st_mode), fh.read(MAX_FILE_BYTES + 1), None
