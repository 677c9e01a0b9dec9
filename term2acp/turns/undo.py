"""``/undo``: take the session's last turn back (files and conversation).

The last turn not undone yet (``turns``, ``sessions/checkpoints.py``) is undone: each file
it changed is put back as the checkpoint recorded it (created files removed, deleted ones
written again, mode and symlinks kept), unless the file is not what the turn left any
more (the user changed it since: it is left alone and named), it is outside the
workspace, or its content was not recorded (named with the reason). Its messages leave
the model's conversation (the history is cut where the turn began), and its user
message in the replay journal is marked undone. Repeated, it walks further back.

The agent does this outside the sandbox, so nothing a command of the session does may
steer it: the session's background processes are stopped meanwhile (``sandbox/freezer``),
every file is reached through folder descriptors opened from the root without following
links (a folder swapped for a symlink leaves its files alone and named), and it is all or
nothing: the new contents are staged beside their targets, then committed one by one with
what was there moved aside; any failure rolls back what was committed and the turn stays
to undo.

Runtime only: returns the report the command shows.
"""

import errno
import hashlib
import logging
import os
import secrets
import stat

from term2acp.turns import context
from term2acp.turns.checkpoints import digest_of

log = logging.getLogger(__name__)

UNDONE_MARK = "[undone by /undo] "


def undo_last(session):
    """Undo the last turn of ``session``; returns the report (text for the user)."""
    store = session.store
    last = store.turns.last(session.id)
    if last is None:
        return "Nothing to undo: no turn of this session changed anything or is left to undo."
    _number, message_id, start, prompt, notes = last
    files = store.turns.files(session.id, message_id)
    roots = (session.root, *session.extra_roots)
    report = Report(session.root)
    with session.shell.freeze(), _Changes(roots) as changes:
        try:
            for path, state, mode, content, after, why in files:
                try:
                    _stage(changes, path, state, mode, content, after, why, report)
                except OSError as exc:
                    exc.filename = path
                    raise
            changes.commit()
            for note in notes:
                report.not_restored.append(f"shell changes: {note}")
            history_note = _rewind_history(session, start)
            store.turns.mark_undone(session.id, message_id)
            _mark_journal(session, message_id)
            session.commit()
        except Exception as exc:
            changes.roll_back()
            if not isinstance(exc, OSError):
                raise
            shown = report.shown(exc.filename) if exc.filename else "a file"
            log.warning("/undo rolled back: %s: %s", exc.filename, exc)
            return (f"Nothing was undone: {shown} could not be put back "
                    f"({exc.strerror or exc}). Every file is as it was before /undo.")
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


def _root_of(roots, path):
    """The session root ``path`` is in (the innermost, if one holds another), or None."""
    inside = [root for root in roots if _inside(root, path)]
    return max(inside, key=len) if inside else None


def _stage(changes, path, state, mode, content, after, why, report):
    """Check one recorded file against what is there now, and stage putting it back."""
    shown = report.shown(path)
    if state == "unrecorded":
        report.not_restored.append(f"{shown} ({why or 'it was not recorded'})")
        return
    root = _root_of(changes.roots, path)
    if root is None:
        report.not_restored.append(f"{shown} (it is outside the workspace)")
        return
    folder, name = os.path.split(os.path.relpath(path, root))
    try:
        dfd = changes.folder(root, folder, create=False)
    except NotADirectoryError:  # a folder on its way is a symlink or a file now
        report.left.append(f"{shown} (a folder on its path is not a folder any more)")
        return
    now = None if dfd is None else fingerprint_at(dfd, name)
    if after is None:
        report.left.append(f"{shown} (the agent stopped during that turn, so what it left "
                           "is unknown)")
        return
    if now != (None if after == "absent" else after):
        report.left.append(shown)
        return
    if now == digest_of(state, content or b""):
        return  # the turn left it as it was
    if state == "absent":
        changes.remove(dfd, name, path)
        report.removed.append(shown)
    else:
        dfd = changes.folder(root, folder, create=True)
        changes.put(dfd, name, path, state, mode, content or b"")
        report.restored.append(shown)


def fingerprint_at(dfd, name):
    """:func:`checkpoints.fingerprint` of ``name`` in the open folder ``dfd``."""
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except OSError:
        return "other"
    if stat.S_ISLNK(st.st_mode):
        return "link:" + os.readlink(name, dir_fd=dfd)
    if not stat.S_ISREG(st.st_mode):
        return "other"
    digest = hashlib.sha256()
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=dfd)
    except OSError:
        return "other"
    with os.fdopen(fd, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()


_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class _Changes:
    """The file changes of one /undo, in every root of the session: reached through folder
    descriptors opened from their root without following links, staged (new contents in
    temp files beside their targets), then committed (the current file moved aside, the
    staged one linked in) and on any failure rolled back in reverse, whatever root they
    were in; the files moved aside go once all is done."""

    def __init__(self, roots):
        self.roots = roots
        self.fds = {}  # (root, relative folder) -> fd
        self.made = []  # (parent fd, name) of folders created, in order
        self.staged = []  # (fd, name, temp or None, path): temp None removes the file
        self.done = []  # (fd, name, placed, aside) committed, for a roll back

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for fd, _name, temp, _path in self.staged:
            if temp:
                _unlink(fd, temp)
        for fd, _name, _placed, aside in self.done:
            if aside:
                _unlink(fd, aside)
        for fd in self.fds.values():
            os.close(fd)
        self.fds = {}

    def folder(self, root, relative, create):
        """The fd of ``relative`` (below ``root``), None when missing and not ``create``;
        NotADirectoryError when a part of it is a symlink or a file."""
        if (root, relative) in self.fds:
            return self.fds[root, relative]
        if not relative:
            fd = os.open(root, _DIR)
        else:
            parent_rel, name = os.path.split(relative)
            parent = self.folder(root, parent_rel, create)
            if parent is None:
                return None
            try:
                fd = os.open(name, _DIR, dir_fd=parent)
            except FileNotFoundError:
                if not create:
                    return None
                os.mkdir(name, 0o777, dir_fd=parent)
                self.made.append((parent, name))
                fd = os.open(name, _DIR, dir_fd=parent)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise NotADirectoryError(exc.errno, exc.strerror, relative) from None
                raise
        self.fds[root, relative] = fd
        return fd

    def remove(self, dfd, name, path):
        self.staged.append((dfd, name, None, path))

    def put(self, dfd, name, path, state, mode, content):
        temp = f".term2-undo-{secrets.token_hex(6)}"
        try:
            if state == "link":
                os.symlink(os.fsdecode(content), temp, dir_fd=dfd)
            else:
                fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                             | os.O_CLOEXEC, 0o600, dir_fd=dfd)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(content)
                    os.fchmod(fh.fileno(), mode if mode is not None else 0o644)
        except OSError as exc:
            _unlink(dfd, temp)
            exc.filename = path
            raise
        self.staged.append((dfd, name, temp, path))

    def commit(self):
        """Each staged change in order: what is there now moves aside, the new content is
        linked in (never over a file that appeared meanwhile)."""
        while self.staged:
            dfd, name, temp, path = self.staged[0]
            aside = f".term2-undo-{secrets.token_hex(6)}"
            try:
                try:
                    os.rename(name, aside, src_dir_fd=dfd, dst_dir_fd=dfd)
                except FileNotFoundError:
                    aside = None
                self.done.append((dfd, name, False, aside))
                if temp:
                    os.link(temp, name, src_dir_fd=dfd, dst_dir_fd=dfd,
                            follow_symlinks=False)
                    self.done[-1] = (dfd, name, True, aside)
                    _unlink(dfd, temp)
            except OSError as exc:
                exc.filename = path
                raise
            self.staged.pop(0)

    def roll_back(self):
        for dfd, name, placed, aside in reversed(self.done):
            try:
                if placed:
                    os.unlink(name, dir_fd=dfd)
                if aside:
                    os.rename(aside, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except OSError as exc:
                log.error("/undo could not roll back %s: %s", name, exc)
        self.done = []
        for parent, name in reversed(self.made):
            try:
                os.rmdir(name, dir_fd=parent)
            except OSError:
                pass


def _unlink(dfd, name):
    try:
        os.unlink(name, dir_fd=dfd)
    except OSError:
        pass


def _rewind_history(session, start):
    """Cut the conversation where the turn began (stored and in memory)."""
    rows = session.store.load_history(session.id)
    if any(context.is_marker(message) for message in rows[start:]):
        return ("The conversation was compacted since that turn, so the model still has "
                "a summary of it.")
    session.store.cut_history(session.id, start)
    context.restore(session, rows[:start])
    session.history_rows = start
    return "The model will not see that turn any more."


def _mark_journal(session, message_id):
    """The turn's user message replays marked undone."""
    payload = session.store.journal_record(session.id, message_id)
    if payload is None:
        return
    content = payload.get("content") or []
    if payload.get("undone"):
        return
    payload["undone"] = True
    payload["content"] = [{"type": "text", "text": UNDONE_MARK}] + list(content)
    session.store.journal_put(session.id, "user_message", message_id, payload)
