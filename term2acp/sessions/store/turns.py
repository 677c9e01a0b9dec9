"""The named statements on the tables of the turns' checkpoints (``turns`` and
``checkpoint_files``): what ``turns/checkpoints.py`` records while a turn runs, what
``turns/undo.py`` and ``turns/rewind.py`` read to take turns back. ``Store.turns`` is one
:class:`TurnRows`; writes queue with the store's other writes (no extra commit), reads
wait for what was queued before them."""

import json

_BEGIN = ("INSERT OR IGNORE INTO turns (session_id, number, message_id, history_start, prompt)"
          " VALUES (?, (SELECT COALESCE(MAX(number), 0) + 1 FROM turns WHERE session_id = ?),"
          " ?, ?, ?)")
_FILE = ("INSERT OR IGNORE INTO checkpoint_files (session_id, turn, path, state, mode, content,"
         " size, why) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
_SIZES = ("SELECT f.turn, SUM(f.size) FROM checkpoint_files f JOIN turns t ON t.session_id ="
          " f.session_id AND t.message_id = f.turn WHERE f.session_id = ? AND f.state IN"
          " ('file', 'link') GROUP BY f.turn ORDER BY MAX(t.number) DESC")


class TurnRows:
    def __init__(self, store):
        self._store = store

    # ------------------------------------------------------------ while a turn runs
    def begin(self, session_id, message_id, history_start, prompt):
        """The turn of the user message ``message_id`` begins at history row
        ``history_start`` (numbered after the session's last turn; once per message)."""
        self._store._write(_BEGIN, (session_id, session_id, message_id, history_start,
                                    (prompt or "")[:200]), session_id)

    def record_file(self, session_id, turn, path, state, mode, content, why=None):
        """What ``path`` was before ``turn`` first changed it (the first record stays)."""
        self._store._write(_FILE, (session_id, turn, path, state, mode, content, len(content),
                                   why), session_id)

    def file_left(self, session_id, turn, path, after):
        """The fingerprint of what ``turn`` left at ``path`` (``absent`` for nothing)."""
        self._store._write("UPDATE checkpoint_files SET after = ? WHERE session_id = ? AND"
                           " turn = ? AND path = ?", (after, session_id, turn, path), session_id)

    def finish(self, session_id, turn, notes):
        """The open turn ``turn`` is done, with its notes (a list of texts, or empty)."""
        self._store._write("UPDATE turns SET state = 'done', notes = ? WHERE session_id = ? AND"
                           " message_id = ? AND state = 'open'",
                           (json.dumps(notes) if notes else None, session_id, turn), session_id)

    def sizes(self, session_id):
        """``[(turn, bytes of file contents kept)]``, the newest turn first."""
        return self._store._rows(_SIZES, (session_id,))

    def drop_contents(self, session_id, turn, why):
        """Forget the file contents ``turn`` kept (they are named as unrecorded, ``why``)."""
        self._store._write("UPDATE checkpoint_files SET state = 'unrecorded', content = NULL,"
                           " size = 0, why = ? WHERE session_id = ? AND turn = ? AND state IN"
                           " ('file', 'link')", (why, session_id, turn), session_id)

    # ------------------------------------------------------------ /undo, /rewind
    def last(self, session_id):
        """``(number, message_id, history_start, prompt, notes)`` of the last turn not
        undone (``notes`` decoded: a list), or None."""
        rows = self._store._rows("SELECT number, message_id, history_start, prompt, notes FROM"
                                 " turns WHERE session_id = ? AND state != 'undone' ORDER BY"
                                 " number DESC LIMIT 1", (session_id,))
        if not rows:
            return None
        number, message_id, start, prompt, notes = rows[0]
        return number, message_id, start, prompt, json.loads(notes) if notes else []

    def left(self, session_id):
        """``[(number, prompt)]`` of the turns not undone, in order."""
        return self._store._rows("SELECT number, prompt FROM turns WHERE session_id = ? AND"
                                 " state != 'undone' ORDER BY number", (session_id,))

    def files(self, session_id, turn):
        """``[(path, state, mode, content, after, why)]`` that ``turn`` recorded, by path."""
        return self._store._rows("SELECT path, state, mode, content, after, why FROM"
                                 " checkpoint_files WHERE session_id = ? AND turn = ? ORDER BY"
                                 " path", (session_id, turn))

    def mark_undone(self, session_id, turn):
        self._store._write("UPDATE turns SET state = 'undone' WHERE session_id = ? AND"
                           " message_id = ?", (session_id, turn), session_id)
