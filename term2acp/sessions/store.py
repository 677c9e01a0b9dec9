"""The embedded session store: SQLite (stdlib), WAL, busy timeout, forward migrations.

Tables: ``sessions`` (what session/list shows), ``history`` (the model-facing
conversation, so a resumed session continues with context) and ``journal`` (consolidated
records for replay: whole messages with stable ids, final tool-call states).

Off the hub (issue 16): every statement runs in one dedicated native thread with its own
connection (:class:`_Worker`); the calling greenlet waits cooperatively, so inserts,
commits, fsyncs and SQLite's own busy waits (another process holding the write lock, up
to ``BUSY_WAIT``) never block the hub. Writes are not sent one by one: they queue in
memory on the hub (a list append), together with the journal records the Recorders
(``sessions/journal.py``) consolidate (they register with :meth:`Store.defer`), and go to
the thread as one batch, one transaction, with the next read or commit. A transaction
is open only while the thread runs one batch: nothing holds the write lock between
batches (several processes may share the file), and no timer is needed to bound it. Jobs
run in the order they were sent, so a read sees every write made before it; the price is
that a read waits behind a batch that waits for another process's write lock.

Durability: :meth:`Store.commit` is the one commit path; it waits (cooperatively) until
everything written so far, and every record a Recorder holds, is committed. The protocol
writer calls :meth:`Store.commit_quietly` (the same commit, which logs instead of raising)
right before it writes a batch of lines, so every line it writes reports only what is
already committed: a ``kill -9`` loses nothing the client was told. A batch that fails
(disk full, locked past the busy timeout, a damaged file) is rolled back; whoever waited
for it gets the :class:`StoreError`, and every session whose changes it carried is told on
its own next ``commit(session_id)``, so the client hears of it as before.
"""

import base64
import binascii
import fcntl
import json
import logging
import os
import sqlite3
import weakref
from collections import deque
from datetime import datetime, timezone

from gevent import get_hub, monkey
from gevent.hub import Waiter

from term2acp.core.pacing import restore_switch_interval, shorten_switch_interval
from term2acp.core.text import scrub_text as clean_text
from term2acp.sessions.errors import InvalidCursor, StoreError, StoreRecovered

log = logging.getLogger(__name__)

# The store thread is a real thread even under monkey-patching (threading.Thread would be
# a greenlet), fed by a native queue (_queue.SimpleQueue is never patched; its get()
# releases the GIL), and it sleeps natively.
_start_thread = monkey.get_original("_thread", "start_new_thread")
_native_lock = monkey.get_original("_thread", "allocate_lock")
_sleep = monkey.get_original("time", "sleep")
_monotonic = monkey.get_original("time", "monotonic")
try:
    from _queue import SimpleQueue as _NativeQueue
except ImportError:  # pragma: no cover - CPython always has it
    from queue import SimpleQueue as _NativeQueue  # noqa: N813

HANDOFF_INTERVAL = 0.0002  # seconds: the GIL switch interval while a store job is out

SCHEMA_VERSION = 4
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
    # 4: checkpoints (issue 28, sessions/checkpoints.py): one row per prompt turn that
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
    store thread or the warm-up thread, never on the hub)."""

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


def store_path(settings):
    """The store file in the data directory."""
    return os.path.join(settings.data_dir, "sessions.sqlite3")


def store_for(settings):
    """The session store the settings name (not opened yet)."""
    return Store(store_path(settings), getattr(settings, "store_busy_timeout", BUSY_WAIT))


# ---------------------------------------------------------------- opening (off the hub)
def _open_db(path, busy_wait=BUSY_WAIT):
    """Open (create, migrate) the store file in the calling native thread; returns
    ``(connection, notice)``, where ``notice`` says where a damaged file was moved (or
    None).

    A zero-length or corrupt (not SQLite) file is never silently recreated: it is moved
    aside to ``<path>.damaged-<UTC time>`` (with its -wal/-shm files) and a fresh store is
    started.
    """
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot open the session store {path}: {exc}") from None
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


def _connect(path, busy_wait):
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


# ---------------------------------------------------------------- the store thread
class _Job:
    """One trip to the store thread: a batch of writes (one transaction), then ``op``."""

    __slots__ = ("batch", "sids", "op", "args", "done", "value", "error", "lost", "waiters")

    def __init__(self, batch, sids, op, args):
        self.batch, self.sids, self.op, self.args = batch, sids, op, args
        self.done = False  # delivered (set on the hub; greenlets wait with wait())
        self.value = self.error = self.lost = None
        self.waiters = None  # Waiters of the greenlets in wait(), switched to on delivery

    def wait(self):
        """Until the job is delivered. The delivery switches to the waiting greenlet at
        once (an Event's waiters run one loop iteration later): the protocol writer waiting
        for its commit resumes before a streaming turn's socket is read on, instead of
        after the turn has handled everything that arrived meanwhile."""
        while not self.done:
            waiter = Waiter()
            if self.waiters is None:
                self.waiters = [waiter]
            else:
                self.waiters.append(waiter)
            waiter.get()


class _Worker:
    """One native thread with the store's connection: runs jobs in the order submitted.

    Hub side: :meth:`submit` (never blocks) and :meth:`_deliver` (an async watcher's
    callback: wakes the waiters, notes the sessions whose changes a failed batch lost).
    Thread side: :meth:`_serve`. It holds no reference to the :class:`Store`, so a store
    dropped without ``close()`` stops its thread through a finalizer.
    """

    def __init__(self):
        self.db = None  # the connection: opened, used and closed in the thread only
        self.lost = {}  # session id -> StoreError of a failed batch that held its changes
        self.alive = True
        self.exited = _native_lock()  # released by the thread as it ends
        self.exited.acquire()
        self._jobs = _NativeQueue()
        self._finished = deque()
        self._outstanding = 0
        self._short = False  # a short switch interval is held while jobs are out
        self._hub_loop = get_hub().loop
        self._async = self._hub_loop.async_()
        self._async.start(self._deliver)
        self._async.ref = False  # keeps the loop alive only while a job is out
        _start_thread(self._serve, ())

    # ------------------------------------------------------------ hub side
    def submit(self, job):
        """Queue ``job`` for the thread; never blocks. Jobs run in the order submitted."""
        self._outstanding += 1
        if self._outstanding == 1:
            self._async.ref = True
            # The thread takes the GIL back after every SQLite call; while the hub is busy
            # (a streaming turn) each of those waits up to one switch interval (5 ms by
            # default), so a batch of a dozen statements took tens of ms. While a job is
            # out the interval is short; it is restored when the last job is delivered.
            shorten_switch_interval(HANDOFF_INTERVAL)
            self._short = True
        self._jobs.put(job)

    def _deliver(self):
        finished, woken = self._finished, None
        while finished:
            job = finished.popleft()
            self._outstanding -= 1
            if job.lost is not None:
                for sid in job.sids:
                    self.lost[sid] = job.lost
            job.done = True
            if job.waiters is not None:
                woken = job.waiters if woken is None else woken + job.waiters
                job.waiters = None
        if not self._outstanding:
            self._async.ref = False
            if self._short:
                restore_switch_interval(HANDOFF_INTERVAL)
                self._short = False
        if not self.alive:
            self._async.close()
        if woken is not None:
            for waiter in woken:  # each runs until it waits again, then we go on
                waiter.switch(None)

    def stop(self):
        """Without waiting (a finalizer): end the thread after the jobs queued."""
        if self.alive:
            self._jobs.put(None)

    # ------------------------------------------------------------ thread side
    def _serve(self):
        try:
            self._loop()
        finally:
            self.exited.release()

    def _loop(self):
        jobs, finished, wake = self._jobs, self._finished, self._async.send
        while True:
            job = jobs.get()
            if job is None:  # the store was dropped without close()
                self._close_db()
                self.alive = False
                return
            try:
                self._run(job)
            except BaseException as exc:  # noqa: BLE001 - the waiter must always wake
                job.error = exc
            closing = job.op is _close
            if closing:
                self.alive = False
            finished.append(job)
            wake()
            if closing:
                return

    def _run(self, job):
        db = self.db
        batch, job.batch = job.batch, None
        if batch:
            try:
                if db is None:
                    raise StoreError("the session store is not open")
                db.execute("BEGIN IMMEDIATE")
                for sql, args in batch:
                    if type(sql) is str:
                        db.execute(sql, args)
                    else:
                        sql(db, *args)
                db.execute("COMMIT")
            except Exception as exc:  # noqa: BLE001 - told to the hub
                try:
                    if db is not None and db.in_transaction:
                        db.execute("ROLLBACK")  # never leave a half-open transaction
                except sqlite3.Error:
                    pass
                job.lost = StoreError(f"session store commit failed: {_reason(exc)}")
        if job.op is not None:
            try:
                job.value = job.op(self, *job.args)
            except sqlite3.Error as exc:
                job.error = StoreError(f"session store error: {exc}")
            except Exception as exc:  # noqa: BLE001 - raised in the waiting greenlet
                job.error = exc

    def _close_db(self):
        db, self.db = self.db, None
        if db is not None:
            try:
                db.close()
            except sqlite3.Error:
                pass


def _reason(exc):
    if isinstance(exc, sqlite3.Error):
        return f"session store error: {exc}"
    return str(exc)


# Thread-side operations: op(worker, *args) -> value.
def _open(worker, path, busy_wait):
    if worker.db is not None:  # opened meanwhile (another greenlet's open)
        return None
    worker.db, moved = _open_db(path, busy_wait)
    return moved


def _close(worker):
    worker._close_db()


def _fetchall(worker, sql, args):
    return worker.db.execute(sql, args).fetchall()


def _fetchone(worker, sql, args):
    return worker.db.execute(sql, args).fetchone()


def _load_history(worker, session_id):
    rows = worker.db.execute("SELECT message FROM history WHERE session_id = ? ORDER BY seq",
                             (session_id,)).fetchall()
    return [json.loads(r[0]) for r in rows]


def _read_journal(worker, sql, args):
    rows = worker.db.execute(sql, args).fetchall()
    return [(kind, json.loads(payload)) for kind, payload in rows]


def _fork(db, source_id, session_id, cwd, title, stamp):
    db.execute("INSERT INTO sessions (id, cwd, title, created_at, updated_at, provider, model,"
               " effort, mode, mcp_servers) SELECT ?, ?, ?, ?, ?, provider, model, effort, mode,"
               " NULL FROM sessions WHERE id = ?",
               (session_id, cwd, title, stamp, stamp, source_id))
    db.execute("INSERT INTO history (session_id, seq, message) SELECT ?, seq, message"
               " FROM history WHERE session_id = ?", (session_id, source_id))
    db.execute("INSERT INTO journal (session_id, seq, kind, key, payload) SELECT ?, seq, kind,"
               " key, payload FROM journal WHERE session_id = ?", (session_id, source_id))


def _journal_put(db, session_id, kind, key, data):
    """Insert or replace the record ``key`` (keeps its original position)."""
    cur = db.execute("UPDATE journal SET payload = ? WHERE session_id = ? AND key = ?",
                     (data, session_id, key))
    if cur.rowcount == 0:
        db.execute("INSERT INTO journal (session_id, seq, kind, key, payload) VALUES (?,"
                   " (SELECT COALESCE(MAX(seq), 0) + 1 FROM journal WHERE session_id = ?),"
                   " ?, ?, ?)", (session_id, session_id, kind, key, data))


# ---------------------------------------------------------------- the store (hub side)
class Store:
    def __init__(self, path, busy_wait=BUSY_WAIT):
        self.path = path
        self.busy_wait = busy_wait  # seconds a statement waits for another process's lock
        self._opened = False  # the store thread holds the open connection
        self._worker = None  # started on the hub by the first trip
        self._pending = []  # (sql or callable, args) written since the last trip
        self._pending_sids = set()
        self._sources = {}  # Recorders with records not yet written (see defer)
        self._last_write = None  # the newest job that carried writes
        self._closed = False
        self.recovered = None  # a StoreRecovered notice to tell on the next open()
        self._reader = None  # the hub's read-only connection (session/list), once used

    # ------------------------------------------------------------ lifecycle
    @property
    def is_open(self):
        return self._opened

    def open(self):
        """Open (create, migrate) the store, in the store thread.

        A zero-length or corrupt (not SQLite) file is never silently recreated: it is moved
        aside to ``<path>.damaged-<UTC time>`` (with its -wal/-shm files), a fresh store is
        started, and this call raises :class:`StoreRecovered` once, saying where the old
        file went; later calls use the fresh store.
        """
        if self._opened:
            if self.recovered is not None:  # opened by the warm-up: tell the notice once
                notice, self.recovered = self.recovered, None
                raise StoreRecovered(notice)
            return self
        self._closed = False
        job = self._trip(_open, (self.path, self.busy_wait), writes=False)
        self._opened = True
        if job.value is not None:
            log.error("%s", job.value)
            raise StoreRecovered(job.value)
        return self

    def close(self):
        """Commit what is pending, close the connection and end the store thread."""
        try:
            if self._opened and not self._closed:
                self.commit()
        finally:
            self._closed = True
            reader, self._reader = self._reader, None
            if reader is not None:
                reader.close()
            worker, self._worker = self._worker, None
            if worker is not None:
                job = _Job(None, (), _close, ())
                worker.submit(job)
                job.wait()
                # The thread is returning (it delivered its last job): wait out its last
                # instructions, bounded, so that none is left behind.
                if worker.exited.acquire(timeout=1.0):
                    worker.exited.release()  # stays free: "this thread has ended"
            self._opened = False

    # ------------------------------------------------------------ reads on the hub
    def _read_here(self, sql, args):
        """Rows of a short read (session/list) on the hub's own read connection, so that
        it never queues behind the store thread's batches (under a busy hub those take
        several GIL hand-overs each). In WAL mode a reader never waits for a writer, and
        this connection never sleeps on a lock: when SQLite says busy (a recovery or
        checkpoint under way) the read goes to the store thread after all. It sees what
        is committed, which is everything the client has been told (the writer commits
        before each batch of lines goes out)."""
        reader = self._hub_reader()
        if reader is not None:
            try:
                return reader.execute(sql, args).fetchall()
            except sqlite3.OperationalError:
                pass
        return self._trip(_fetchall, (sql, args)).value

    def _hub_reader(self):
        if self._reader is None and self._opened and not self._closed:
            try:
                reader = sqlite3.connect(self.path, timeout=0, isolation_level=None,
                                         check_same_thread=False)
                reader.execute("PRAGMA busy_timeout = 0")  # never sleep on the hub
                reader.execute("PRAGMA query_only = 1")
            except sqlite3.Error:
                return None
            self._reader = reader
        return self._reader

    # ------------------------------------------------------------ plumbing
    def defer(self, source):
        """``source.flush()`` writes its changed records (with :meth:`journal_put`) right
        before the next trip to the store thread: a Recorder registers when it first has
        something to write since its last flush."""
        self._sources[source] = None

    def _write(self, sql, args, session_id):
        """Queue a write: it goes to the store thread with the next trip (one transaction)."""
        self._pending.append((sql, args))
        self._pending_sids.add(session_id)

    # The tables other modules own (checkpoints, turns: sessions/checkpoints.py) go
    # through these two: a queued write and a read that waits for what was queued before.
    write = _write

    def rows(self, sql, args=()):
        return self._trip(_fetchall, (sql, args)).value

    def _trip(self, op, args=(), writes=True):
        """Send what is pending (and ``op``) to the store thread; wait cooperatively."""
        job = self._send(op, args, writes)
        job.wait()
        if job.error is not None:
            raise job.error
        return job

    def _send(self, op, args=(), writes=True):
        if self._closed:
            raise StoreError(f"the session store {self.path} is closed")
        if writes and not self._opened:
            self.open()  # on first use, as before (may raise StoreError/StoreRecovered)
        batch = sids = None
        if writes:
            if self._sources:
                sources, self._sources = self._sources, {}
                for source in sources:
                    source.flush()
            if self._pending:
                batch, self._pending = self._pending, []
                sids, self._pending_sids = self._pending_sids, set()
        if batch is None and op is None:
            return None
        worker = self._worker
        if worker is None:
            worker = self._worker = _Worker()
            weakref.finalize(self, worker.stop)  # dropped without close(): end the thread
        job = _Job(batch, sids, op, args)
        if batch is not None:
            self._last_write = job
        worker.submit(job)
        return job

    def commit(self, session_id=None):
        """Everything written so far (and every record a Recorder holds) is committed when
        this returns; waits cooperatively. Raises the StoreError of the batch it waited
        for; with ``session_id``, also one that an earlier batch (committed by someone
        else, e.g. the protocol writer) lost of that session's changes."""
        job = self._send(None) if (self._pending or self._sources) else None
        if job is None:
            last = self._last_write  # committing now: someone else's trip carries it
            if last is not None and not last.done:
                job = last
        if job is not None:
            job.wait()
            if job.lost is not None:
                if session_id is not None:
                    self._worker.lost.pop(session_id, None)
                raise job.lost
        if session_id is not None and self._worker is not None:
            lost = self._worker.lost.pop(session_id, None)
            if lost is not None:
                raise lost

    def take_lost(self, session_id):
        """The StoreError of a batch that lost ``session_id``'s changes and was not told yet
        (e.g. a failed turn's last updates, written while the store was still full or
        locked), now forgotten; None when there is none."""
        return self._worker.lost.pop(session_id, None) if self._worker is not None else None

    def commit_quietly(self):
        """:meth:`commit` for the protocol writer, which calls it right before it writes a
        batch of lines, so that what they report is committed first (a ``kill -9`` loses
        nothing the client was told). It never raises: a failure is logged here, and the
        sessions whose changes it lost hear of it on their next ``commit(session_id)``.
        After :meth:`close` what was written since is dropped, said once."""
        if self._closed:
            if self._pending or self._sources:
                log.warning("session store closed: %d changes made since are not stored",
                            len(self._pending) + len(self._sources))
                self._pending, self._pending_sids, self._sources = [], set(), {}
            return
        try:
            self.commit()
        except StoreError as exc:
            log.warning("writing lines whose changes could not be committed: %s", exc)

    # ------------------------------------------------------------ sessions
    def create_session(self, session_id, cwd, provider, model):
        stamp = now()
        self._write("INSERT INTO sessions (id, cwd, title, created_at, updated_at, provider, model)"
                    " VALUES (?, ?, NULL, ?, ?, ?, ?)",
                    (session_id, cwd, stamp, stamp, clean_text(provider), clean_text(model)),
                    session_id)
        self.commit()
        return {"id": session_id, "cwd": cwd, "title": None, "updated_at": stamp,
                "provider": provider, "model": model}

    def delete_session(self, session_id):
        """Remove a session and everything stored with it (a failed session/new, or
        session/delete), committed."""
        for table, column in (("journal", "session_id"), ("history", "session_id"),
                              ("checkpoint_files", "session_id"), ("turns", "session_id"),
                              ("sessions", "id")):
            self._write(f"DELETE FROM {table} WHERE {column} = ?", (session_id,), session_id)
        self.commit()

    def fork_session(self, source_id, session_id, cwd, title):
        """A new session with ``source_id``'s choices, conversation and replay journal (not
        its checkpoints: undo in the fork starts from the fork), committed."""
        stamp = now()
        self._write(_fork, (source_id, session_id, cwd, clean_text(title) if title else None,
                            stamp), session_id)
        self.commit()
        return stamp

    def get_session(self, session_id):
        row = self._trip(_fetchone, ("SELECT id, cwd, title, updated_at, provider, model, effort,"
                                     " mode, mcp_servers FROM sessions WHERE id = ?",
                                     (session_id,))).value
        if row is None:
            return None
        keys = ("id", "cwd", "title", "updated_at", "provider", "model", "effort", "mode")
        return dict(zip(keys, row), mcp_servers=_servers(row[-1]))

    def set_choices(self, session_id, provider, model, effort, mode):
        """The session's picker choices (restored on resume)."""
        self._write("UPDATE sessions SET provider = ?, model = ?, effort = ?, mode = ?"
                    " WHERE id = ?", (clean_text(provider), clean_text(model), effort, mode,
                                      session_id), session_id)

    def set_mcp_servers(self, session_id, described):
        """The MCP servers the session is now connected with: ``ServerConfig.describe()``
        dicts (no secrets in them), or an empty list."""
        self._write("UPDATE sessions SET mcp_servers = ? WHERE id = ?",
                    (json.dumps(described) if described else None, session_id), session_id)

    def touch(self, session_id, title=None):
        stamp = now()
        if title is None:
            self._write("UPDATE sessions SET updated_at = ? WHERE id = ?", (stamp, session_id),
                        session_id)
        else:
            self._write("UPDATE sessions SET updated_at = ?, title = ? WHERE id = ?",
                        (stamp, clean_text(title), session_id), session_id)
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
        rows = self._read_here(sql, args + [limit + 1])
        more = len(rows) > limit
        rows = rows[:limit]
        next_cursor = encode_cursor(rows[-1][3], rows[-1][0]) if more and rows else None
        keys = ("id", "cwd", "title", "updated_at")
        return [dict(zip(keys, r), mcp_servers=_servers(r[4])) for r in rows], next_cursor

    # ------------------------------------------------------------ history
    def append_history(self, session_id, message):
        self._write("INSERT INTO history (session_id, seq, message) VALUES (?,"
                    " (SELECT COALESCE(MAX(seq), 0) + 1 FROM history WHERE session_id = ?), ?)",
                    (session_id, session_id, json.dumps(message)), session_id)

    def replace_history(self, session_id, messages):
        """Rewrite a session's conversation (a repair), committed."""
        self._write("DELETE FROM history WHERE session_id = ?", (session_id,), session_id)
        for seq, message in enumerate(messages, 1):
            self._write("INSERT INTO history (session_id, seq, message) VALUES (?, ?, ?)",
                        (session_id, seq, json.dumps(message)), session_id)
        self.commit()

    def load_history(self, session_id):
        return self._trip(_load_history, (session_id,)).value

    # ------------------------------------------------------------ journal
    def journal_put(self, session_id, kind, key, payload):
        """Insert or replace the record ``key`` (keeps its original position). The payload
        is encoded now (it may change later on the hub), written with the next trip."""
        self._write(_journal_put, (session_id, kind, key, json.dumps(payload)), session_id)

    def journal(self, session_id, kinds=None):
        """``(kind, payload)`` records in order; ``kinds`` restricts the kinds read."""
        sql, args = "SELECT kind, payload FROM journal WHERE session_id = ?", [session_id]
        if kinds:
            sql += f" AND kind IN ({', '.join('?' * len(kinds))})"
            args += list(kinds)
        return self._trip(_read_journal, (sql + " ORDER BY seq", args)).value
