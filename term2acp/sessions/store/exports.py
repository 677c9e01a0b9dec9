"""The named statements of the session as exported: the ``recording`` table
(``sessions/recording.py`` writes it as the session runs: ``Store.recording``) and a whole
session's rows read for an export document and written back from one
(``sessions/transfer.py``: ``Store.documents``)."""

import json

_SESSION = ("id", "cwd", "title", "created_at", "updated_at", "provider", "model", "effort",
            "mode", "mcp_servers")


class RecordingRows:
    def __init__(self, store):
        self._store = store

    def add(self, session_id, kind, turn, payload, content=None):
        """One recorded item (``payload`` JSON text, ``content`` bytes or None), last."""
        self._store._write("INSERT INTO recording (session_id, seq, kind, turn, payload, content)"
                           " VALUES (?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM recording WHERE"
                           " session_id = ?), ?, ?, ?, ?)",
                           (session_id, session_id, kind, turn, payload, content), session_id)

    def files(self, session_id):
        """``[(payload JSON text, bytes of content)]`` of the files recorded so far."""
        return self._store._rows("SELECT payload, length(content) FROM recording WHERE"
                                 " session_id = ? AND kind = 'file'", (session_id,))


class DocumentRows:
    def __init__(self, store):
        self._store = store

    def read(self, session_id):
        """A session's rows, decoded where they are JSON: ``session`` (a dict),
        ``history`` (messages), ``journal`` (``(kind, key, payload)``), ``recording``
        (``(kind, turn, payload, content)``), ``turns`` (``(number, message_id, prompt,
        state)``), ``checkpoints`` (``(path, state, mode, content)`` of the files the turns
        recorded, in turn order); None for an id the store does not know."""
        rows = self._store._rows(f"SELECT {', '.join(_SESSION)} FROM sessions WHERE id = ?",
                                 (session_id,))
        if not rows:
            return None
        session = dict(zip(_SESSION, rows[0]))
        session["mcp_servers"] = json.loads(session["mcp_servers"] or "[]")
        rows_of = self._store._rows
        return {
            "session": session,
            "history": [json.loads(m) for (m,) in rows_of(
                "SELECT message FROM history WHERE session_id = ? ORDER BY seq", (session_id,))],
            "journal": [(k, key, json.loads(p)) for k, key, p in rows_of(
                "SELECT kind, key, payload FROM journal WHERE session_id = ? ORDER BY seq",
                (session_id,))],
            "recording": [(kind, turn, json.loads(payload), content)
                          for kind, turn, payload, content in rows_of(
                              "SELECT kind, turn, payload, content FROM recording WHERE"
                              " session_id = ? ORDER BY seq", (session_id,))],
            "turns": rows_of("SELECT number, message_id, prompt, state FROM turns WHERE"
                             " session_id = ? ORDER BY number", (session_id,)),
            "checkpoints": rows_of(
                "SELECT f.path, f.state, f.mode, f.content FROM checkpoint_files f JOIN turns t"
                " ON t.session_id = f.session_id AND t.message_id = f.turn WHERE f.session_id"
                " = ? AND f.state IN ('file', 'link', 'absent') ORDER BY t.number",
                (session_id,)),
        }

    def write(self, session_id, session, history, journal, recording, stamp):
        """The session ``session_id`` (free) with ``session``'s row (a dict; ``stamp`` its
        update time, also its creation time when it has none), ``history`` (messages),
        ``journal`` (``(kind, key, payload)``) and ``recording`` (``(kind, turn, payload,
        content)``), committed."""
        write = self._store._write
        write("INSERT INTO sessions (id, cwd, title, created_at, updated_at, provider, model,"
              " effort, mode, mcp_servers) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
              (session_id, session["cwd"], session.get("title"),
               session.get("created_at") or stamp, stamp, session.get("provider"),
               session.get("model"), session.get("effort"), session.get("mode"),
               json.dumps(session["mcp_servers"]) if session.get("mcp_servers") else None),
              session_id)
        for seq, message in enumerate(history, 1):
            write("INSERT INTO history (session_id, seq, message) VALUES (?, ?, ?)",
                  (session_id, seq, json.dumps(message)), session_id)
        for seq, (kind, key, payload) in enumerate(journal, 1):
            text = json.dumps(payload)
            write("INSERT INTO journal (session_id, seq, kind, key, payload, wire1, wire2) "
                  "VALUES (?, ?, ?, ?, ?, ?, ?)", (session_id, seq, kind, key, text,
                                                   *self._store.encoded(kind, payload, text)),
                  session_id)
        for seq, (kind, turn, payload, content) in enumerate(recording, 1):
            write("INSERT INTO recording (session_id, seq, kind, turn, payload, content)"
                  " VALUES (?, ?, ?, ?, ?, ?)",
                  (session_id, seq, kind, turn, json.dumps(payload), content), session_id)
        self._store.commit()
