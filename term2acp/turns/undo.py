"""``/undo``: take the session's last turn back (files and conversation).

The last turn not undone yet (``turns``, ``sessions/checkpoints.py``) is undone: each file
it changed is put back as the checkpoint recorded it (created files removed, deleted ones
written again, mode and symlinks kept), unless the file is not what the turn left any
more (the user changed it since: it is left alone and named), it is outside the
workspace, or its content was not recorded (named with the reason). Its messages leave
the model's conversation (the history is cut where the turn began), and its user
message in the replay journal is marked undone. Repeated, it walks further back.

Runtime only: returns the report the command shows.
"""

import json
import logging
import os
import secrets

from term2acp.turns import context
from term2acp.turns.checkpoints import digest_of, fingerprint

log = logging.getLogger(__name__)

UNDONE_MARK = "[undone by /undo] "


def undo_last(session):
    """Undo the last turn of ``session``; returns the report (text for the user)."""
    store = session.store
    rows = store.rows("SELECT number, message_id, history_start, prompt, notes FROM turns"
                      " WHERE session_id = ? AND state != 'undone' ORDER BY number DESC"
                      " LIMIT 1", (session.id,))
    if not rows:
        return "Nothing to undo: no turn of this session changed anything or is left to undo."
    _number, message_id, start, prompt, notes = rows[0]
    files = store.rows("SELECT path, state, mode, content, after, why FROM checkpoint_files"
                       " WHERE session_id = ? AND turn = ? ORDER BY path",
                       (session.id, message_id))
    report = Report(session.root)
    for path, state, mode, content, after, why in files:
        _restore(session.root, path, state, mode, content, after, why, report)
    for note in json.loads(notes) if notes else ():
        report.not_restored.append(f"shell changes: {note}")
    history_note = _rewind_history(session, start)
    store.write("UPDATE turns SET state = 'undone' WHERE session_id = ? AND message_id = ?",
                (session.id, message_id), session.id)
    _mark_journal(session, message_id)
    session.commit()
    return report.text(prompt, history_note)


class Report:
    def __init__(self, root):
        self.root = root
        self.restored, self.removed, self.left, self.not_restored = [], [], [], []

    def shown(self, path):
        rel = os.path.relpath(path, self.root)
        return path if rel.startswith("..") else rel

    def text(self, prompt, history_note):
        words = " ".join((prompt or "").split())
        words = words if len(words) <= 60 else words[:59] + "…"
        lines = [f"Undid the last turn (\u201c{words}\u201d)."]
        if self.restored:
            lines.append("Restored: " + ", ".join(self.restored) + ".")
        if self.removed:
            lines.append("Removed (created by that turn): " + ", ".join(self.removed) + ".")
        if not (self.restored or self.removed or self.left or self.not_restored):
            lines.append("It changed no files.")
        if self.left:
            lines.append("Left alone (changed since that turn, so your version is kept): "
                         + ", ".join(self.left) + ".")
        if self.not_restored:
            lines.append("Not restored: " + "; ".join(self.not_restored) + ".")
        lines.append(history_note)
        return "\n".join(lines)


def _inside(root, path):
    root = root.rstrip(os.sep)
    return path.startswith(root + os.sep)


def _restore(root, path, state, mode, content, after, why, report):
    shown = report.shown(path)
    if state == "unrecorded":
        report.not_restored.append(f"{shown} ({why or 'it was not recorded'})")
        return
    if not _inside(root, path) or os.path.realpath(os.path.dirname(path)) != \
            os.path.dirname(path):
        report.not_restored.append(f"{shown} (it is outside the workspace)")
        return
    now = fingerprint(path)
    if after is None:
        report.left.append(f"{shown} (the agent stopped during that turn, so what it left "
                           "is unknown)")
        return
    if now != (None if after == "absent" else after):
        report.left.append(shown)
        return
    if now == digest_of(state, content or b""):
        return  # the turn left it as it was
    try:
        if state == "absent":
            os.unlink(path)
            report.removed.append(shown)
        else:
            _put(path, state, mode, content or b"")
            report.restored.append(shown)
    except OSError as exc:
        report.not_restored.append(f"{shown} ({exc.strerror})")


def _put(path, state, mode, content):
    """Put ``content`` back at ``path`` in one rename (a file of ``mode``, or a symlink)."""
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    temp = os.path.join(parent, f".term2-undo-{secrets.token_hex(6)}")
    try:
        if state == "link":
            os.symlink(os.fsdecode(content), temp)
        else:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                         mode if mode is not None else 0o644)
            with os.fdopen(fd, "wb") as fh:
                fh.write(content)
            if mode is not None:
                os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise


def _rewind_history(session, start):
    """Cut the conversation where the turn began (stored and in memory)."""
    rows = session.store.load_history(session.id)
    if any(context.is_marker(message) for message in rows[start:]):
        return ("The conversation was compacted since that turn, so the model still has "
                "a summary of it.")
    session.store.write("DELETE FROM history WHERE session_id = ? AND seq > ?",
                        (session.id, start), session.id)
    context.restore(session, rows[:start])
    session.history_rows = start
    return "The model will not see that turn any more."


def _mark_journal(session, message_id):
    """The turn's user message replays marked undone."""
    rows = session.store.rows("SELECT payload FROM journal WHERE session_id = ? AND key = ?",
                              (session.id, message_id))
    if not rows:
        return
    payload = json.loads(rows[0][0])
    content = payload.get("content") or []
    if payload.get("undone"):
        return
    payload["undone"] = True
    payload["content"] = [{"type": "text", "text": UNDONE_MARK}] + list(content)
    session.store.journal_put(session.id, "user_message", message_id, payload)
