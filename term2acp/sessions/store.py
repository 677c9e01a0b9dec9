"""The embedded session store: SQLite (stdlib), WAL, busy timeout, forward migrations.

Tables: ``sessions`` (what session/list shows), ``history`` (the model-facing
conversation, so a resumed session continues with context) and ``journal`` (consolidated
records for replay: whole messages with stable ids, final tool-call states).

Journal writes made while streaming are not committed one by one: the protocol writer
calls :meth:`Store.commit` right before it writes a batch of lines to stdout, so every
change is committed before it is reported on the wire at the cost of one commit per
batch. Several processes may share the file; WAL plus a busy timeout serialise writers.
"""

import base64
import binascii
import json
import logging
import os
import sqlite3
from datetime import datetime, timezone

from term2acp.sessions.errors import InvalidCursor, StoreError

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
MIGRATIONS = {
    1: """
    CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        cwd TEXT NOT NULL,
        title TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        provider TEXT,
        model TEXT
    );
    CREATE INDEX sessions_by_update ON sessions (updated_at DESC, id DESC);
    CREATE INDEX sessions_by_cwd ON sessions (cwd, updated_at DESC, id DESC);
    CREATE TABLE history (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        message TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    CREATE TABLE journal (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        kind TEXT NOT NULL,
        key TEXT NOT NULL,
        payload TEXT NOT NULL,
        PRIMARY KEY (session_id, seq),
        UNIQUE (session_id, key)
    );
    """,
}


def now():
    return datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def encode_cursor(updated_at, session_id):
    raw = json.dumps([updated_at, session_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor):
    """Returns ``(updated_at, id)``; raises InvalidCursor for anything we did not mint."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        updated_at, session_id = json.loads(raw)
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
        raise InvalidCursor(cursor) from None
    if not isinstance(updated_at, str) or not isinstance(session_id, str):
        raise InvalidCursor(cursor)
    return updated_at, session_id


class Store:
    def __init__(self, path):
        self.path = path
        self._db = None
        self._dirty = False
        self.on_begin = None  # called when a batch transaction opens (to bound its length)

    # ------------------------------------------------------------ lifecycle
    @property
    def is_open(self):
        return self._db is not None

    def open(self):
        if self._db is not None:
            return self
        directory = os.path.dirname(self.path)
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=5.0, isolation_level=None,
                                 check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the session store {self.path}: {exc}") from None
        try:
            db.execute("PRAGMA busy_timeout = 5000")
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")
            self._migrate(db)
        except sqlite3.Error as exc:
            db.close()
            raise StoreError(f"the session store {self.path} is unusable ({exc}); "
                             "move it aside to start a fresh one") from None
        self._db = db
        return self

    def _migrate(self, db):
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise sqlite3.DatabaseError(f"schema version {version} is newer than this term2acp")
        for target in range(version + 1, SCHEMA_VERSION + 1):
            db.execute("BEGIN IMMEDIATE")
            try:
                if db.execute("PRAGMA user_version").fetchone()[0] >= target:
                    db.execute("ROLLBACK")  # another process migrated meanwhile
                    continue
                for statement in MIGRATIONS[target].split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute(f"PRAGMA user_version = {target}")
                db.execute("COMMIT")
            except sqlite3.Error:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

    def close(self):
        if self._db is not None:
            try:
                self.commit()
            finally:
                self._db.close()
                self._db = None

    # ------------------------------------------------------------ plumbing
    def _execute(self, sql, args=()):
        if self._db is None:
            self.open()
        try:
            return self._db.execute(sql, args)
        except sqlite3.Error as exc:
            raise StoreError(f"session store error: {exc}") from None

    def _write(self, sql, args=()):
        """A write inside the open batch transaction (committed by :meth:`commit`)."""
        if not self._dirty:
            self._execute("BEGIN IMMEDIATE")
            self._dirty = True
            if self.on_begin is not None:
                self.on_begin()
        return self._execute(sql, args)

    def commit(self):
        if self._dirty and self._db is not None:
            self._dirty = False
            try:
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise StoreError(f"session store commit failed: {exc}") from None

    # ------------------------------------------------------------ sessions
    def create_session(self, session_id, cwd, provider, model):
        stamp = now()
        self._write("INSERT INTO sessions (id, cwd, title, created_at, updated_at, provider, model)"
                    " VALUES (?, ?, NULL, ?, ?, ?, ?)", (session_id, cwd, stamp, stamp, provider, model))
        self.commit()
        return {"id": session_id, "cwd": cwd, "title": None, "updated_at": stamp,
                "provider": provider, "model": model}

    def get_session(self, session_id):
        row = self._execute("SELECT id, cwd, title, updated_at, provider, model FROM sessions"
                            " WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            return None
        keys = ("id", "cwd", "title", "updated_at", "provider", "model")
        return dict(zip(keys, row))

    def touch(self, session_id, title=None):
        stamp = now()
        if title is None:
            self._write("UPDATE sessions SET updated_at = ? WHERE id = ?", (stamp, session_id))
        else:
            self._write("UPDATE sessions SET updated_at = ?, title = ? WHERE id = ?",
                        (stamp, title, session_id))
        return stamp

    def list_sessions(self, cwd=None, cursor=None, limit=50):
        where, args = [], []
        if cwd is not None:
            where.append("cwd = ?")
            args.append(cwd)
        if cursor is not None:
            updated_at, session_id = decode_cursor(cursor)
            where.append("(updated_at, id) < (?, ?)")  # a row value: one index seek
            args += [updated_at, session_id]
        sql = "SELECT id, cwd, title, updated_at FROM sessions"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY updated_at DESC, id DESC LIMIT ?"
        rows = self._execute(sql, args + [limit + 1]).fetchall()
        more = len(rows) > limit
        rows = rows[:limit]
        next_cursor = encode_cursor(rows[-1][3], rows[-1][0]) if more and rows else None
        return [dict(zip(("id", "cwd", "title", "updated_at"), r)) for r in rows], next_cursor

    # ------------------------------------------------------------ history
    def append_history(self, session_id, message):
        self._write("INSERT INTO history (session_id, seq, message) VALUES (?,"
                    " (SELECT COALESCE(MAX(seq), 0) + 1 FROM history WHERE session_id = ?), ?)",
                    (session_id, session_id, json.dumps(message)))

    def load_history(self, session_id):
        rows = self._execute("SELECT message FROM history WHERE session_id = ? ORDER BY seq",
                             (session_id,)).fetchall()
        return [json.loads(r[0]) for r in rows]

    # ------------------------------------------------------------ journal
    def journal_put(self, session_id, kind, key, payload):
        """Insert or replace the record ``key`` (keeps its original position)."""
        data = json.dumps(payload)
        cur = self._write("UPDATE journal SET payload = ? WHERE session_id = ? AND key = ?",
                          (data, session_id, key))
        if cur.rowcount == 0:
            self._write("INSERT INTO journal (session_id, seq, kind, key, payload) VALUES (?,"
                        " (SELECT COALESCE(MAX(seq), 0) + 1 FROM journal WHERE session_id = ?),"
                        " ?, ?, ?)", (session_id, session_id, kind, key, data))

    def journal(self, session_id):
        rows = self._execute("SELECT kind, payload FROM journal WHERE session_id = ? ORDER BY seq",
                             (session_id,)).fetchall()
        return [(kind, json.loads(payload)) for kind, payload in rows]
