"""A fork's rows: the source's option values, conversation, replay journal and recording,
all of them or up to a fork point (runs in the store's thread, inside its transaction)."""


def copy_session(db, source_id, session_id, cwd, title, stamp, upto=None):
    """``upto``: ``(history rows kept, journal key of the fork point)``, or None for all.
    The journal is kept up to and including the record of that key (all of it when the
    journal has no such record)."""
    db.execute("INSERT INTO sessions (id, cwd, title, created_at, updated_at, provider, model,"
               " effort, mode, mcp_servers) SELECT ?, ?, ?, ?, ?, provider, model, effort, mode,"
               " NULL FROM sessions WHERE id = ?",
               (session_id, cwd, title, stamp, stamp, source_id))
    rows, journal_to = (1 << 62), (1 << 62)
    if upto is not None:
        rows = upto[0]
        found = db.execute("SELECT seq FROM journal WHERE session_id = ? AND key = ?",
                           (source_id, upto[1])).fetchone()
        if found is not None:
            journal_to = found[0]
    db.execute("INSERT INTO history (session_id, seq, message) SELECT ?, seq, message"
               " FROM history WHERE session_id = ? AND seq <= ?", (session_id, source_id, rows))
    db.execute("INSERT INTO journal (session_id, seq, kind, key, payload, wire1, wire2) SELECT"
               " ?, seq, kind, key, payload, wire1, wire2 FROM journal WHERE session_id = ? AND"
               " seq <= ?",
               (session_id, source_id, journal_to))
    if upto is None:  # the recording of a fork at a message starts with the fork
        db.execute("INSERT INTO recording (session_id, seq, kind, turn, payload, content) SELECT"
                   " ?, seq, kind, turn, payload, content FROM recording WHERE session_id = ?",
                   (session_id, source_id))
