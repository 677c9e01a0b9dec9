"""The session store's API on the hub: queued writes, the one commit path
(:meth:`Store.commit`), reads and queries. How writes travel and when they are durable
is told in the package's docstring (``sessions/store/__init__.py``)."""

import json
import logging
import os
import sqlite3
import weakref
from datetime import datetime, timezone

from term2acp.core.nesting import may_be_too_deep
from term2acp.core.text import scrub_text as clean_text
from term2acp.sessions.errors import StoreError, StoreRecovered
from term2acp.sessions.store import tails
from term2acp.sessions.store.exports import DocumentRows, RecordingRows
from term2acp.sessions.store.forks import copy_session
from term2acp.sessions.store.listing import decode_cursor, encode_cursor, servers_of
from term2acp.sessions.store.schema import BUSY_WAIT, connect_reader, open_db
from term2acp.sessions.store.turns import TurnRows
from term2acp.sessions.store.worker import Worker

log = logging.getLogger(__name__)


def now():
    return datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def store_path(settings):
    """The store file in the data directory."""
    return os.path.join(settings.data_dir, "sessions.sqlite3")


def store_for(settings, replay_forms=None):
    """The session store the settings name (not opened yet)."""
    return Store(store_path(settings), settings.store_busy_timeout, replay_forms)


# Thread-side operations: op(worker, *args) -> value.
def _open(worker, path, busy_wait):
    if worker.db is not None:  # opened meanwhile (another greenlet's open)
        return None
    worker.db, moved = open_db(path, busy_wait)
    return moved


def _fetchall(worker, sql, args):
    return worker.db.execute(sql, args).fetchall()


def _fetchone(worker, sql, args):
    return worker.db.execute(sql, args).fetchone()


class Store:
    def __init__(self, path, busy_wait=BUSY_WAIT, replay_forms=None):
        self.path = path
        # (kind, payload) -> (v1, v2) journal record's updates encoded, or None each
        # (acp/replay.py, given by the server); None: every record translated at replay
        self.replay_forms = replay_forms
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
        # The named statements on the tables other layers own (their SQL stays here):
        self.turns = TurnRows(self)  # checkpoints, /undo, /rewind (store/turns.py)
        self.recording = RecordingRows(self)  # sessions/recording.py (store/exports.py)
        self.documents = DocumentRows(self)  # sessions/transfer.py (store/exports.py)

    # ------------------------------------------------------------ lifecycle
    @property
    def is_open(self):
        return self._opened

    def open(self, tell=True):
        """Open (create, migrate) the store, in the store thread.

        A zero-length or corrupt (not SQLite) file is never silently recreated: it is moved
        aside to ``<path>.damaged-<UTC time>`` (with its -wal/-shm files), a fresh store is
        started, and this call raises :class:`StoreRecovered` once, saying where the old
        file went; later calls use the fresh store. ``tell=False`` (the server's open before
        the first line is read) keeps that notice for the next open() to raise.
        """
        if self._opened:
            if self.recovered is not None and tell:  # opened by one who kept the notice: tell it
                notice, self.recovered = self.recovered, None
                raise StoreRecovered(notice)
            return self
        self._closed = False
        job = self._trip(_open, (self.path, self.busy_wait), writes=False)
        self._opened = True
        if job.value is not None:
            log.error("%s", job.value)
            if tell:
                raise StoreRecovered(job.value)
            self.recovered = job.value
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
                worker.close()
            self._opened = False

    # ------------------------------------------------------------ reads on the hub
    def _read_here(self, sql, args):
        """Rows of a short read (session/list) on the hub's own read connection, so that
        it never queues behind the store thread's batches; when SQLite says busy (a
        recovery or checkpoint under way) the read goes to the store thread after all.
        It sees what is committed, which is everything the client has been told."""
        if self._reader is None and self._opened and not self._closed:
            try:
                self._reader = connect_reader(self.path)
            except sqlite3.Error:
                pass
        if self._reader is not None:
            try:
                return self._reader.execute(sql, args).fetchall()
            except sqlite3.OperationalError:
                pass
        return self._trip(_fetchall, (sql, args)).value

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

    def _rows(self, sql, args=()):
        """A read that waits for what was queued before it (the package's own)."""
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
            worker = self._worker = Worker()
            weakref.finalize(self, worker.stop)  # dropped without close(): end the thread
        job = worker.submit(batch, sids, op, args)
        if batch is not None:
            self._last_write = job
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
                if session_id is not None and self._worker is not None:
                    self._worker.lost.pop(session_id, None)  # told now: not again
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
                              ("recording", "session_id"),
                              ("checkpoint_files", "session_id"), ("turns", "session_id"),
                              ("sessions", "id")):
            self._write(f"DELETE FROM {table} WHERE {column} = ?", (session_id,), session_id)
        self.commit()

    def fork_session(self, source_id, session_id, cwd, title, upto=None):
        """A new session with ``source_id``'s config option values, conversation and replay
        journal (not its checkpoints: undo in the fork starts from the fork), committed;
        ``upto``: only up to a fork point (``forks.copy_session``)."""
        stamp = now()
        self._write(copy_session, (source_id, session_id, cwd,
                                   clean_text(title) if title else None, stamp, upto), session_id)
        self.commit()
        return stamp

    def get_session(self, session_id):
        row = self._trip(_fetchone, ("SELECT id, cwd, title, updated_at, provider, model, effort,"
                                     " mode, mcp_servers FROM sessions WHERE id = ?",
                                     (session_id,))).value
        if row is None:
            return None
        keys = ("id", "cwd", "title", "updated_at", "provider", "model", "effort", "mode")
        return dict(zip(keys, row), mcp_servers=servers_of(row[-1]))

    def set_option_values(self, session_id, provider, model, effort, mode):
        """The session's config option values (restored on resume)."""
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
        return [dict(zip(keys, r), mcp_servers=servers_of(r[4])) for r in rows], next_cursor

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

    def cut_history(self, session_id, start):
        """The conversation keeps its first ``start`` rows (/undo)."""
        self._write("DELETE FROM history WHERE session_id = ? AND seq > ?", (session_id, start),
                    session_id)

    def load_history(self, session_id):
        return self._trip(tails.load_history, (session_id,)).value

    def history_tail(self, session_id, marker):
        """``(first seq, messages from the last marker on, the whole history's cost)``."""
        return self._trip(tails.history_tail, (session_id, marker)).value

    def replace_tail(self, session_id, start, messages):
        """Rewrite the conversation from ``start`` on (a repair), committed."""
        self._write(tails.replace_tail, (session_id, start, messages), session_id)
        self.commit()

    # ------------------------------------------------------------ journal
    def journal_put(self, session_id, kind, key, payload):
        """Insert or replace the record ``key`` (keeps its original position). The payload
        and its replay updates (``replay_forms``; none for a payload that may nest too
        deep) are encoded now (it may change later on the hub), written with the next trip."""
        text = json.dumps(payload)
        self._write(tails.journal_put, (session_id, kind, key, text,
                                        *self.encoded(kind, payload, text)), session_id)

    def encoded(self, kind, payload, text):
        """``(wire1, wire2)`` of a journal record (``replay_forms``); none for a payload
        (``text`` encoded) that may nest too deep: replay judges it as before."""
        if self.replay_forms is None or may_be_too_deep(text):
            return None, None
        return self.replay_forms(kind, payload)

    def journal_record(self, session_id, key):
        """The payload of the record ``key``, or None."""
        rows = self._rows("SELECT payload FROM journal WHERE session_id = ? AND key = ?",
                          (session_id, key))
        return json.loads(rows[0][0]) if rows else None

    def journal_open(self, session_id):
        """The tool call and terminal records that never settled."""
        return self._trip(tails.journal_open, (session_id,)).value

    def journal_pages(self, session_id, kinds=None):
        """``(kind, payload)`` records in order, read a page at a time as consumed (a
        small first page, so the first ones go out at once); payload None: nested too
        deep to send (``tails.journal_page``)."""
        after, size = 0, tails.FIRST_PAGE
        while True:
            page = self._trip(tails.journal_page, (session_id, after, kinds, size)).value
            yield from ((kind, payload) for _, kind, payload in page)
            if len(page) < size:
                return
            after, size = page[-1][0], tails.PAGE

    def journal_lines(self, session_id, version, head, tail):
        """The journal in order, a page at a time as consumed: runs of records stored with
        their ``version`` updates encoded as bytes blocks of lines (``head`` + update +
        ``tail`` each), other records as ``(kind, payload)`` (``tails.journal_lines``)."""
        after, size = 0, tails.FIRST_PAGE
        while True:
            after, count, pieces = self._trip(tails.journal_lines, (
                session_id, after, tails.WIRES[version - 1], head, tail, size)).value
            yield from pieces
            if count < size:
                return
            size = tails.PAGE

    def journal(self, session_id, kinds=None):
        """``(kind, payload)`` records in order; ``kinds`` restricts the kinds read."""
        return list(self.journal_pages(session_id, kinds))
