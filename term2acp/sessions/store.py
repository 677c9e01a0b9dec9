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
import fcntl
import json
import logging
import os
import sqlite3
import time
from datetime import datetime, timezone

import gevent

from term2acp.core.text import scrub_text as clean_text
from term2acp.sessions.errors import InvalidCursor, StoreError, StoreRecovered

log = logging.getLogger(__name__)

SCHEMA_VERSION = 3
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
    # 2: the session's choices (the editor's pickers); NULL = the config file's default
    2: """
    ALTER TABLE sessions ADD COLUMN effort TEXT;
    ALTER TABLE sessions ADD COLUMN mode TEXT
    """,
    # 3: the MCP servers the session was last connected with (issue 13): a JSON array of
    # ServerConfig.describe() (name, transport, command or URL without query); never env or
    # header values. NULL = none.
    3: """
    ALTER TABLE sessions ADD COLUMN mcp_servers TEXT
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


def _servers(column):
    """The ``mcp_servers`` column -> a list of dicts (empty for NULL or anything unreadable)."""
    if not column:
        return []
    try:
        value = json.loads(column)
    except ValueError:
        return []
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


SQLITE_BUSY = 5
SQLITE_LOCKED = 6
SQLITE_CORRUPT = 11
BUSY_WAIT = 5.0  # seconds a statement waits for another process's write lock
SQLITE_NOTADB = 26


def _busy(exc):
    """SQLITE_BUSY or SQLITE_LOCKED (any extended code)."""
    return (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in (SQLITE_BUSY, SQLITE_LOCKED)


class _Corrupt(Exception):
    """The file is not an SQLite database, or a corrupt one."""


def _is_empty_file(path):
    try:
        return os.stat(path).st_size == 0
    except OSError:
        return False


class _InitLock:
    """``flock`` around inspecting and creating the store, so that of several processes
    starting on one damaged file exactly one moves it aside (cooperative wait, bounded)."""

    def __init__(self, path, timeout=10.0):
        self.path = path
        self.timeout = timeout
        self.fd = None

    def __enter__(self):
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError:
            return self  # e.g. a read-only data dir: opening then says what is wrong
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(self.fd)
                    raise StoreError(f"the session store {self.path} stayed locked by another "
                                     "term2-acp process while it was being opened") from None
                gevent.sleep(0.01)

    def __exit__(self, *exc):
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)


def store_path(settings):
    """The store file in the data directory."""
    return os.path.join(settings.data_dir, "sessions.sqlite3")


class Store:
    def __init__(self, path):
        self.path = path
        self._db = None
        self._dirty = False
        self.on_begin = None  # called when a batch transaction opens (to bound its length)
        self.recovered = None  # a StoreRecovered notice not yet told (opened off the hub)

    # ------------------------------------------------------------ lifecycle
    @property
    def is_open(self):
        return self._db is not None

    def open(self):
        """Open (create, migrate) the store.

        A zero-length or corrupt (not SQLite) file is never silently recreated: it is moved
        aside to ``<path>.damaged-<UTC time>`` (with its -wal/-shm files), a fresh store is
        started, and this call raises :class:`StoreRecovered` once, saying where the old
        file went; later calls use the fresh store.
        """
        if self._db is not None:
            if self.recovered is not None:  # opened by the warm-up: tell the notice once
                notice, self.recovered = self.recovered, None
                raise StoreRecovered(notice)
            return self
        try:
            os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot open the session store {self.path}: {exc}") from None
        with _InitLock(self.path + ".lock"):  # one process inspects/creates at a time
            moved = None
            if _is_empty_file(self.path):
                moved = self._move_aside("the file is empty (zero length)")
            try:
                db = self._connect()
            except _Corrupt as exc:
                if moved is not None:
                    raise StoreError(f"the session store {self.path} is unusable ({exc})") from None
                moved = self._move_aside(str(exc))
                try:
                    db = self._connect()
                except _Corrupt as again:
                    raise StoreError(f"the session store {self.path} is unusable ({again})") from None
        self._db = db
        if moved is not None:
            raise StoreRecovered(moved)
        return self

    def _connect(self):
        try:
            db = sqlite3.connect(self.path, timeout=5.0, isolation_level=None,
                                 check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the session store {self.path}: {exc}") from None
        try:
            db.execute("PRAGMA busy_timeout = 5000")
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")
            self._migrate(db)
            db.execute("PRAGMA busy_timeout = 0")  # from now on _execute waits cooperatively
        except sqlite3.Error as exc:
            db.close()
            if getattr(exc, "sqlite_errorcode", None) in (SQLITE_CORRUPT, SQLITE_NOTADB):
                raise _Corrupt(str(exc)) from None
            raise StoreError(f"the session store {self.path} is unusable ({exc}); "
                             "move it aside to start a fresh one") from None
        return db

    def _move_aside(self, why):
        """Rename the damaged file (and its WAL/SHM files); returns the user-facing notice."""
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
        target = f"{self.path}.damaged-{stamp}"
        try:
            os.rename(self.path, target)
            for suffix in ("-wal", "-shm"):
                if os.path.exists(self.path + suffix):
                    os.rename(self.path + suffix, target + suffix)
        except OSError as exc:
            raise StoreError(f"the session store {self.path} is damaged ({why}) and could not "
                             f"be moved aside: {exc}") from None
        message = (f"the session store {self.path} was damaged ({why}), so term2-acp had to "
                   f"move it aside: it is now {target}, and a fresh store was started "
                   "(sessions created before are in the damaged file). Retry the request.")
        log.error("%s", message)
        return message

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
        """Run one statement. When another process holds the write lock, wait for it
        cooperatively (SQLite's own busy handler sleeps in C and would stall every
        greenlet), for at most BUSY_WAIT seconds."""
        if self._db is None:
            self.open()
        delay, deadline = 0.002, None
        while True:
            try:
                return self._db.execute(sql, args)
            except sqlite3.Error as exc:
                if not _busy(exc):
                    raise StoreError(f"session store error: {exc}") from None
                if deadline is None:
                    deadline = time.monotonic() + BUSY_WAIT
                elif time.monotonic() >= deadline:
                    raise StoreError(f"session store error: {exc}") from None
            gevent.sleep(delay)
            delay = min(delay * 2, 0.05)

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
            try:
                self._execute("COMMIT")
            except StoreError as exc:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")  # never leave a half-open transaction
                raise StoreError(f"session store commit failed: {exc}") from None
            finally:
                self._dirty = False

    # ------------------------------------------------------------ sessions
    def create_session(self, session_id, cwd, provider, model):
        stamp = now()
        self._write("INSERT INTO sessions (id, cwd, title, created_at, updated_at, provider, model)"
                    " VALUES (?, ?, NULL, ?, ?, ?, ?)",
                    (session_id, cwd, stamp, stamp, clean_text(provider), clean_text(model)))
        self.commit()
        return {"id": session_id, "cwd": cwd, "title": None, "updated_at": stamp,
                "provider": provider, "model": model}

    def delete_session(self, session_id):
        """Remove a session that never came to life (a failed session/new), committed."""
        for table, column in (("journal", "session_id"), ("history", "session_id"),
                              ("sessions", "id")):
            self._write(f"DELETE FROM {table} WHERE {column} = ?", (session_id,))
        self.commit()

    def get_session(self, session_id):
        row = self._execute("SELECT id, cwd, title, updated_at, provider, model, effort, mode,"
                            " mcp_servers FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            return None
        keys = ("id", "cwd", "title", "updated_at", "provider", "model", "effort", "mode")
        return dict(zip(keys, row), mcp_servers=_servers(row[-1]))

    def set_choices(self, session_id, provider, model, effort, mode):
        """The session's picker choices (restored on resume)."""
        self._write("UPDATE sessions SET provider = ?, model = ?, effort = ?, mode = ?"
                    " WHERE id = ?", (clean_text(provider), clean_text(model), effort, mode,
                                      session_id))

    def set_mcp_servers(self, session_id, described):
        """The MCP servers the session is now connected with: ``ServerConfig.describe()``
        dicts (no secrets in them), or an empty list."""
        self._write("UPDATE sessions SET mcp_servers = ? WHERE id = ?",
                    (json.dumps(described) if described else None, session_id))

    def touch(self, session_id, title=None):
        stamp = now()
        if title is None:
            self._write("UPDATE sessions SET updated_at = ? WHERE id = ?", (stamp, session_id))
        else:
            self._write("UPDATE sessions SET updated_at = ?, title = ? WHERE id = ?",
                        (stamp, clean_text(title), session_id))
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
        sql = "SELECT id, cwd, title, updated_at, mcp_servers FROM sessions"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY updated_at DESC, id DESC LIMIT ?"
        rows = self._execute(sql, args + [limit + 1]).fetchall()
        more = len(rows) > limit
        rows = rows[:limit]
        next_cursor = encode_cursor(rows[-1][3], rows[-1][0]) if more and rows else None
        keys = ("id", "cwd", "title", "updated_at")
        return [dict(zip(keys, r), mcp_servers=_servers(r[4])) for r in rows], next_cursor

    # ------------------------------------------------------------ history
    def append_history(self, session_id, message):
        self._write("INSERT INTO history (session_id, seq, message) VALUES (?,"
                    " (SELECT COALESCE(MAX(seq), 0) + 1 FROM history WHERE session_id = ?), ?)",
                    (session_id, session_id, json.dumps(message)))

    def replace_history(self, session_id, messages):
        """Rewrite a session's conversation (a repair), committed."""
        self._write("DELETE FROM history WHERE session_id = ?", (session_id,))
        for seq, message in enumerate(messages, 1):
            self._write("INSERT INTO history (session_id, seq, message) VALUES (?, ?, ?)",
                        (session_id, seq, json.dumps(message)))
        self.commit()

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

    def journal(self, session_id, kinds=None):
        """``(kind, payload)`` records in order; ``kinds`` restricts the kinds read."""
        sql, args = "SELECT kind, payload FROM journal WHERE session_id = ?", [session_id]
        if kinds:
            sql += f" AND kind IN ({', '.join('?' * len(kinds))})"
            args += list(kinds)
        rows = self._execute(sql + " ORDER BY seq", args).fetchall()
        return [(kind, json.loads(payload)) for kind, payload in rows]
