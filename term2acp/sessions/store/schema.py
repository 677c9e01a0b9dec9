"""The session store's file: connect, PRAGMAs, forward migrations, and a damaged file moved
aside. Opening runs in the store's own native thread (``worker.py``), never on the hub;
only the short reads of :func:`connect_reader`'s connection run on the hub.

Tables: ``sessions`` (what session/list shows), ``history`` (the model-facing
conversation, so a resumed session continues with context), ``journal`` (consolidated
records for replay: whole messages with stable ids, final tool-call states), ``turns``
and ``checkpoint_files`` (what each prompt turn changed, for /undo), ``recording`` (replies,
permission answers and first-touched files, for export).
"""

import fcntl
import os
import sqlite3
from datetime import datetime, timezone

from gevent import monkey

from term2acp.core import private
from term2acp.sessions.errors import StoreError

# The opening thread is a native one: it sleeps natively while another process opens.
_sleep = monkey.get_original("time", "sleep")
_monotonic = monkey.get_original("time", "monotonic")

SCHEMA_VERSION = 7
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
    # 2: the session's config option values; NULL = the config file's default
    2: """
    ALTER TABLE sessions ADD COLUMN effort TEXT;
    ALTER TABLE sessions ADD COLUMN mode TEXT
    """,
    # 3: the MCP servers the session was last connected with: a JSON array of
    # ServerConfig.describe() (name, transport, command or URL without query); never env or
    # header values. NULL = none.
    3: """
    ALTER TABLE sessions ADD COLUMN mcp_servers TEXT
    """,
    # 4: checkpoints (sessions/checkpoints.py): one row per prompt turn that
    # reached the model (where its messages begin in ``history``, whether /undo took it
    # back) and, per file it changed, what the file was before (``state``: file | link |
    # absent | unrecorded, with the reason in ``why``) and a hash of what it left.
    4: """
    CREATE TABLE turns (
        session_id TEXT NOT NULL,
        number INTEGER NOT NULL,
        message_id TEXT NOT NULL,
        history_start INTEGER NOT NULL,
        prompt TEXT,
        state TEXT NOT NULL DEFAULT 'open',
        notes TEXT,
        PRIMARY KEY (session_id, number),
        UNIQUE (session_id, message_id)
    );
    CREATE TABLE checkpoint_files (
        session_id TEXT NOT NULL,
        turn TEXT NOT NULL,
        path TEXT NOT NULL,
        state TEXT NOT NULL,
        mode INTEGER,
        content BLOB,
        size INTEGER NOT NULL DEFAULT 0,
        after TEXT,
        why TEXT,
        PRIMARY KEY (session_id, turn, path)
    )
    """,
    # 5: the session as recorded for export (sessions/recording.py): each model reply as
    # it arrived (kind 'reply'), each permission question with its answer ('permission'),
    # and each file as it was when the session first touched it ('file', with ``content``).
    5: """
    CREATE TABLE recording (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        kind TEXT NOT NULL,
        turn TEXT,
        payload TEXT NOT NULL,
        content BLOB,
        PRIMARY KEY (session_id, seq)
    )
    """,
    # 6: each journal record's replay update(s) as sent, encoded when recorded, per ACP
    # version (``wire1``, ``wire2``: UTF-8 JSON of the update objects, one a line, without
    # the envelope and session id, spliced in at replay: tails.journal_lines). NULL: the
    # record is translated at replay (rows of earlier versions; kinds whose update depends
    # on the client's capabilities or on other records; acp/replay.py says which). And
    # what a resume looks up without reading every row (tails.py): the last compaction
    # marker, the priced messages' costs, the tool calls and terminals never settled.
    6: """
    ALTER TABLE journal ADD COLUMN wire1 BLOB;
    ALTER TABLE journal ADD COLUMN wire2 BLOB;
    CREATE INDEX history_roles ON history (session_id, json_extract(message, '$.role'), seq);
    CREATE INDEX history_costs ON history (session_id, json_extract(message, '$.cost'))
        WHERE json_type(message, '$.cost') IN ('integer', 'real');
    CREATE INDEX journal_unsettled ON journal (session_id, seq) WHERE
        (kind = 'tool_call' AND COALESCE(json_extract(payload, '$.status'), '')
         NOT IN ('completed', 'failed', 'cancelled'))
        OR (kind = 'terminal' AND json_extract(payload, '$.exit') IS NULL)
    """,
    # 7: a session's journal records of some kinds without reading the others (v1
    # session/load reads its terminals first: tails.journal_page with ``kinds``)
    7: """
    CREATE INDEX journal_kinds ON journal (session_id, kind, seq)
    """,
}


SQLITE_CORRUPT = 11
SQLITE_NOTADB = 26
BUSY_WAIT = 5.0  # seconds a statement waits for another process's write lock (in the thread)


class _Corrupt(Exception):
    """The file is not an SQLite database, or a corrupt one."""


def _is_empty_file(path):
    try:
        return os.stat(path).st_size == 0
    except OSError:
        return False


class _InitLock:
    """``flock`` around inspecting and creating the store, so that of several processes
    starting on one damaged file exactly one moves it aside (bounded wait; runs in the
    store thread, never on the hub)."""

    def __init__(self, path, timeout=10.0):
        self.path = path
        self.timeout = timeout
        self.fd = None

    def __enter__(self):
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError:
            return self  # e.g. a read-only data dir: opening then says what is wrong
        deadline = _monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except BlockingIOError:
                if _monotonic() > deadline:
                    os.close(self.fd)
                    raise StoreError(f"the session store {self.path} stayed locked by another "
                                     "term2-acp process while it was being opened") from None
                _sleep(0.01)

    def __exit__(self, *exc):
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)


def open_db(path, busy_wait=BUSY_WAIT):
    """Open (create, migrate) the store file in the calling native thread; returns
    ``(connection, notice)``, where ``notice`` says where a damaged file was moved (or
    None).

    A zero-length or corrupt (not SQLite) file is never silently recreated: it is moved
    aside to ``<path>.damaged-<UTC time>`` (with its -wal/-shm files) and a fresh store is
    started.
    """
    try:
        private.make_dirs(os.path.dirname(path))
    except OSError as exc:
        raise StoreError(f"cannot open the session store {path}: {exc}") from None
    # one an older version made readable by others (SQLite's files follow the store's mode)
    private.tighten(os.path.dirname(path), path, path + "-wal", path + "-shm", path + ".lock")
    with _InitLock(path + ".lock"):  # one process inspects/creates at a time
        moved = None
        if _is_empty_file(path):
            moved = _move_aside(path, "the file is empty (zero length)")
        try:
            db = _connect(path, busy_wait)
        except _Corrupt as exc:
            if moved is not None:
                raise StoreError(f"the session store {path} is unusable ({exc})") from None
            moved = _move_aside(path, str(exc))
            try:
                db = _connect(path, busy_wait)
            except _Corrupt as again:
                raise StoreError(f"the session store {path} is unusable ({again})") from None
    return db, moved


def connect_reader(path):
    """A read-only connection for short reads on the hub (session/list). In WAL mode a
    reader never waits for a writer, and this one never sleeps on a lock: SQLite says
    busy at once (a recovery or checkpoint under way) and the caller reads elsewhere."""
    reader = sqlite3.connect(path, timeout=0, isolation_level=None, check_same_thread=False)
    reader.execute("PRAGMA busy_timeout = 0")
    reader.execute("PRAGMA query_only = 1")
    return reader


def _connect(path, busy_wait):
    try:  # made 0600 before SQLite makes it (0644) and its -wal and -shm files like it
        private.create_file(path)
    except OSError:
        pass  # the connect says what is wrong
    try:
        db = sqlite3.connect(path, timeout=busy_wait, isolation_level=None,
                             check_same_thread=False)
    except (OSError, sqlite3.Error) as exc:
        raise StoreError(f"cannot open the session store {path}: {exc}") from None
    try:
        # SQLite's own busy handler sleeps in C: fine in the store thread (the GIL is
        # released), so it stays on for the connection's whole life.
        db.execute(f"PRAGMA busy_timeout = {int(busy_wait * 1000)}")
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        _migrate(db)
        _start_log(db, path, busy_wait)
    except sqlite3.Error as exc:
        db.close()
        if getattr(exc, "sqlite_errorcode", None) in (SQLITE_CORRUPT, SQLITE_NOTADB):
            raise _Corrupt(str(exc)) from None
        raise StoreError(f"the session store {path} is unusable ({exc}); "
                         "move it aside to start a fresh one") from None
    return db


def _move_aside(path, why):
    """Rename the damaged file (and its WAL/SHM files); returns the user-facing notice."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    target = f"{path}.damaged-{stamp}"
    try:
        os.rename(path, target)
        for suffix in ("-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.rename(path + suffix, target + suffix)
    except OSError as exc:
        raise StoreError(f"the session store {path} is damaged ({why}) and could not "
                         f"be moved aside: {exc}") from None
    return (f"the session store {path} was damaged ({why}), so term2-acp had to "
            f"move it aside: it is now {target}, and a fresh store was started "
            "(sessions created before are in the damaged file). Retry the request.")


def _start_log(db, path, busy_wait):
    """Create the write-ahead log now, in the store's thread while it opens: the first
    write to a store without one creates it and syncs its header, and that first write
    would otherwise be the first ``session/new``'s. One write of the schema version,
    unchanged. It never waits: a store in use by another process has its log already."""
    try:
        if os.path.getsize(path + "-wal"):
            return
    except OSError:
        pass  # no log yet: the write below makes it
    db.execute("PRAGMA busy_timeout = 0")
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        db.execute("BEGIN IMMEDIATE")
        db.execute(f"PRAGMA user_version = {int(version)}")
        db.execute("COMMIT")
    except sqlite3.OperationalError:  # busy: another process writes, so the log exists
        if db.in_transaction:
            db.execute("ROLLBACK")
    finally:
        db.execute(f"PRAGMA busy_timeout = {int(busy_wait * 1000)}")


def _migrate(db):
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
