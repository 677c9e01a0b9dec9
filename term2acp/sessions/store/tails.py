"""The store thread's jobs on the history and the journal (``Store`` sends them), and the
reads that stream: what a resumed session needs of its history, the replay journal in
pages.

A resumed session keeps only what the model sees (the history from its last compaction
marker, found by SQLite's JSON functions, with the whole session's cost summed there), and
its replay is read through a cursor (the journal's ``seq``) one page at a time, each
page's updates written before the next is read: the first update goes out after one page,
and the whole history is never in memory at once.
"""

import json

from term2acp.core.nesting import may_be_too_deep, too_deep

FIRST_PAGE, PAGE = 64, 1024  # journal records read in one trip


def load_history(worker, session_id):
    rows = worker.db.execute("SELECT message FROM history WHERE session_id = ? ORDER BY seq",
                             (session_id,)).fetchall()
    return [json.loads(r[0]) for r in rows]


def journal_put(db, session_id, kind, key, data, wire1=None, wire2=None):
    """Insert or replace the record ``key`` (keeps its original position), with its
    encoded updates (schema.py, migration 6) or None."""
    cur = db.execute("UPDATE journal SET payload = ?, wire1 = ?, wire2 = ? WHERE session_id = ?"
                     " AND key = ?", (data, wire1, wire2, session_id, key))
    if cur.rowcount == 0:
        db.execute("INSERT INTO journal (session_id, seq, kind, key, payload, wire1, wire2) "
                   "VALUES (?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM journal WHERE "
                   "session_id = ?), ?, ?, ?, ?, ?)",
                   (session_id, session_id, kind, key, data, wire1, wire2))


def history_tail(worker, session_id, marker):
    """``(first seq, messages from the last ``marker`` on, cost of the whole history)``."""
    db = worker.db
    start = db.execute("SELECT MAX(seq) FROM history WHERE session_id = ? AND "
                       "json_extract(message, '$.role') = ?", (session_id, marker)).fetchone()[0]
    cost = db.execute("SELECT TOTAL(json_extract(message, '$.cost')) FROM history INDEXED BY "
                      "history_costs WHERE session_id = ? AND json_type(message, '$.cost') IN "
                      "('integer', 'real')", (session_id,)).fetchone()[0]
    rows = db.execute("SELECT message FROM history WHERE session_id = ? AND seq >= ? ORDER BY"
                      " seq", (session_id, start or 1)).fetchall()
    return start or 1, [json.loads(row[0]) for row in rows], cost


def replace_tail(db, session_id, start, messages):
    """The history from ``start`` on becomes ``messages`` (a repair)."""
    db.execute("DELETE FROM history WHERE session_id = ? AND seq >= ?", (session_id, start))
    db.executemany("INSERT INTO history (session_id, seq, message) VALUES (?, ?, ?)",
                   [(session_id, seq, json.dumps(m)) for seq, m in enumerate(messages, start)])


def journal_open(worker, session_id):
    """``(kind, payload)`` of the tool calls and terminals that never settled."""
    rows = worker.db.execute(  # the terms of the journal_unsettled index (schema.py), as they are
        "SELECT kind, payload FROM journal WHERE session_id = ? AND ((kind = 'tool_call' AND "
        "COALESCE(json_extract(payload, '$.status'), '') NOT IN ('completed', 'failed', "
        "'cancelled')) OR (kind = 'terminal' AND json_extract(payload, '$.exit') IS NULL)) "
        "ORDER BY seq", (session_id,)).fetchall()
    return [(kind, json.loads(payload)) for kind, payload in rows]


def journal_page(worker, session_id, after, kinds, size):
    """``(seq, kind, payload)`` of up to ``size`` records after ``seq`` ``after``; the
    payload is None for a record that nests deeper than the wire allows (stored before
    that bound existed: encoding it would fail the whole replay), judged here, off the
    hub, and only for the few texts with that many brackets at all."""
    sql, args = "SELECT seq, kind, payload FROM journal WHERE session_id = ? AND seq > ?", \
        [session_id, after]
    if kinds:
        sql += f" AND kind IN ({', '.join('?' * len(kinds))})"
        args += list(kinds)
    rows = worker.db.execute(sql + " ORDER BY seq LIMIT ?", args + [size]).fetchall()
    return [(seq, kind, _unless_too_deep(payload)) for seq, kind, payload in rows]


WIRES = ("wire1", "wire2")


def journal_lines(worker, session_id, after, column, head, tail, size):
    """``(last seq, records read, pieces)`` of up to ``size`` records after ``after``: each
    run of records stored with their updates encoded in ``column`` as one bytes block of
    lines, ``head + update + tail`` each (no decoding, no encoding), any other record as
    ``(kind, payload)`` for the caller to translate (payload None: too deep, as in
    :func:`journal_page`)."""
    assert column in WIRES
    rows = worker.db.execute(
        f"SELECT seq, kind, {column}, CASE WHEN {column} IS NULL THEN payload END FROM journal"
        " WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
        (session_id, after, size)).fetchall()
    pieces, run = [], []
    for _, kind, wire, payload in rows:
        if wire is not None:
            for update in wire.split(b"\n"):
                run += (head, update, tail)
            continue
        if run:
            pieces.append(b"".join(run))
            run = []
        pieces.append((kind, _unless_too_deep(payload)))
    if run:
        pieces.append(b"".join(run))
    return (rows[-1][0] if rows else after), len(rows), pieces


def _unless_too_deep(text):
    payload = json.loads(text)
    return None if may_be_too_deep(text) and too_deep(payload) else payload
