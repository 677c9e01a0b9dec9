"""The store off the hub: statements run in one native thread, writes travel in batches,
the protocol writer commits what a line reports before the line is written (a kill -9
loses nothing the client was told), failures still reach the session."""

import logging
import os
import sqlite3
import time

import gevent
import gevent.os
import gevent.socket
import pytest

from term2acp.core import events as ev
from term2acp.providers.catalog import Catalog
from term2acp.rpc.stream import Writer
from term2acp.sessions.errors import StoreError
from term2acp.sessions.journal import Recorder
from term2acp.sessions.manager import SessionManager
from term2acp.sessions.store import Store
from term2acp.settings import Settings
from tests.support.storefail import refusing_inserts


def store_threads():
    """The store threads of this process, by the name the system shows for them."""
    found = set()
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as fh:
                if fh.read().strip() == "term2-store":
                    found.add(tid)
        except OSError:
            continue
    return found


def ended(threads, timeout=10.0):
    """Polls, bounded, until none of ``threads`` is running any more."""
    deadline = time.monotonic() + timeout
    while threads & store_threads():
        if time.monotonic() > deadline:
            return False
        gevent.sleep(0.01)
    return True


def _store(tmp_path):
    store = Store(str(tmp_path / "sessions.sqlite3")).open()
    store.create_session("s1", "/w", None, None)
    return store


def _journal(path, session_id="s1"):
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT kind, key FROM journal WHERE session_id = ? ORDER BY seq",
                          (session_id,)).fetchall()
    finally:
        db.close()


def _title(path, session_id="s1"):
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT title FROM sessions WHERE id = ?", (session_id,)).fetchone()[0]
    finally:
        db.close()


def test_writes_wait_in_memory_and_are_committed_together(tmp_path):
    """A thousand chunks and a write reach the file only with the next commit, the chunks
    as one whole record."""
    store = _store(tmp_path)
    recorder = Recorder(store, "s1")
    for _ in range(1000):
        recorder.record(ev.TextChunk("m1", "tok "))
    store.touch("s1", "a title")
    gevent.idle()
    assert _journal(store.path) == [] and _title(store.path) is None  # nothing sent yet
    store.commit_quietly()
    assert _journal(store.path) == [("agent_message", "m1")] and _title(store.path) == "a title"
    assert store.journal("s1") == [("agent_message", {"message_id": "m1", "text": "tok " * 1000})]
    store.close()


def test_with_nothing_to_commit_the_writer_does_not_wait_for_the_store(tmp_path):
    """Another process holds the write lock: a commit with nothing pending or on its way
    returns at once (a line that reports nothing new is not held)."""
    store = _store(tmp_path)
    holder = sqlite3.connect(store.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with gevent.Timeout(2):
            store.commit_quietly()
            store.commit("s1")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    store.close()


def test_the_writer_commits_what_a_line_reports_before_the_line_is_written(tmp_path):
    """The writer commits before each batch: when the reader sees the line, the record it
    reports is committed (so a kill -9 right then loses nothing reported)."""
    store = _store(tmp_path)
    recorder = Recorder(store, "s1")
    read_end, write_end = os.pipe()
    writer = Writer(write_end, before_write=store.commit_quietly)
    try:
        recorder.record(ev.ToolCallReported("call_1", title="read", status="pending"))
        writer.put(b'{"reported": "call_1"}\n')
        gevent.socket.wait_read(read_end, timeout=10)
        assert os.read(read_end, 1000) == b'{"reported": "call_1"}\n'
        assert _journal(store.path) == [("tool_call", "call_1")]
    finally:
        writer.drain(5)
        writer.close()
        os.close(read_end)
        store.close()


def test_the_writer_waits_for_changes_another_greenlet_is_committing(tmp_path):
    """A line must not overtake a commit already on its way that holds what it reports."""
    store = _store(tmp_path)
    holder = sqlite3.connect(store.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the store thread's next batch waits for this lock
    try:
        store.touch("s1", "a title")
        committing = gevent.spawn(store.commit, "s1")
        gevent.idle()
        assert not committing.dead  # its batch waits in the store thread, the hub runs
        writer = gevent.spawn(store.commit_quietly)  # nothing pending, but a batch in flight
        gevent.idle()
        assert not writer.dead
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    gevent.joinall([committing, writer], timeout=10)
    assert committing.successful() and writer.successful()
    assert store.get_session("s1")["title"] == "a title"
    store.close()


def _failing_journal(path):
    return refusing_inserts(path, "journal")


def test_a_batch_the_writer_could_not_commit_is_told_to_the_session(tmp_path, caplog):
    settings = Settings.load(env={"TERM2ACP_HOME": str(tmp_path / "home")})
    manager = SessionManager(settings, Catalog(settings), dict)
    session = manager.new(str(tmp_path))
    other = manager.new(str(tmp_path))
    db = _failing_journal(manager.store.path)
    session.emit(ev.TextChunk("m1", "lost"))
    session.append_history({"role": "user", "content": "lost too"})  # same batch: rolled back
    with caplog.at_level(logging.WARNING, logger="term2acp.sessions.store"):
        manager.store.commit_quietly()  # the writer's hook never raises: it logs
    assert "disk is full" in caplog.text
    other.commit()  # another session lost nothing: not told
    with pytest.raises(StoreError, match="disk is full"):
        session.commit()  # the turn's next commit: the client hears of it
    session.commit()  # told once
    assert manager.store.load_history(session.id) == []
    db.execute("DROP TRIGGER no_room")
    db.close()
    session.emit(ev.TextChunk("m1", " and found"))
    session.commit()
    assert list(manager.journal(session))[0][1]["text"] == "lost and found"
    manager.shutdown(1)


def test_a_failed_commit_is_raised_to_its_caller(tmp_path):
    store = _store(tmp_path)
    db = _failing_journal(store.path)
    store.journal_put("s1", "plan", "plan:1", {"entries": []})
    with pytest.raises(StoreError, match="session store commit failed.*disk is full"):
        store.commit("s1")
    store.commit("s1")  # not told twice
    db.close()
    store.close()


def test_close_commits_what_is_pending_and_ends_the_thread(tmp_path, caplog):
    before = store_threads()
    store = _store(tmp_path)
    recorder = Recorder(store, "s1")
    recorder.record(ev.TextChunk("m1", "last words"))
    ours = store_threads() - before
    assert len(ours) == 1
    store.close()
    assert not store.is_open and ended(ours)
    assert _journal(store.path) == [("agent_message", "m1")]
    store.touch("s1")
    with caplog.at_level(logging.WARNING, logger="term2acp.sessions.store"):
        store.commit_quietly()  # the writer draining after shutdown: dropped, said once
        store.commit_quietly()
    assert caplog.text.count("changes made since are not stored") == 1
    store.touch("s1")
    with pytest.raises(StoreError, match="closed"):
        store.commit()
    store.open()  # an explicit open starts again
    store.commit()
    store.close()


def test_shutdown_commits_and_leaves_no_store_thread(tmp_path):
    before = store_threads()
    settings = Settings.load(env={"TERM2ACP_HOME": str(tmp_path / "home")})
    manager = SessionManager(settings, Catalog(settings), dict)
    session = manager.new(str(tmp_path))
    session.emit(ev.TextChunk("m1", "said just before the end"))
    ours = store_threads() - before
    assert len(ours) == 1
    manager.shutdown(1)
    assert ended(ours)  # the thread has ended
    assert _journal(manager.store.path, session.id) == [("agent_message", "m1")]


def test_a_store_dropped_without_close_ends_its_thread(tmp_path):
    import gc
    import weakref

    before = store_threads()
    store = _store(tmp_path)
    ours, gone = store_threads() - before, weakref.ref(store)
    assert len(ours) == 1
    del store
    gc.collect()
    assert gone() is None  # the thread holds no reference to the store
    assert ended(ours)  # and its finalizer ended the thread


def test_session_list_does_not_queue_behind_a_batch_waiting_for_a_lock(tmp_path):
    """A batch waits (in the store thread) for another process's write lock; a list on the
    hub answers meanwhile, with what was committed, and the batch lands once the lock goes."""
    path = str(tmp_path / "sessions.sqlite3")
    store = Store(path, busy_wait=10).open()
    store.create_session("s1", "/w", None, None)
    store.commit()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # WAL: readers go on, writers wait
    try:
        store.touch("s1", "a title")
        writing = gevent.spawn(store.commit)
        gevent.sleep(0.05)
        assert not writing.ready()  # the batch is waiting for the lock
        with gevent.Timeout(2):
            rows, _ = store.list_sessions()
        assert [(r["id"], r["title"]) for r in rows] == [("s1", None)]  # committed state
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    writing.get(timeout=10)
    assert [r["title"] for r in store.list_sessions()[0]] == ["a title"]
    store.close()


def test_a_background_terminal_is_recorded_past_its_turn(tmp_path):
    """A turn's end forgets its records, but not the terminal of a process still running:
    its later output and exit reach the journal too."""
    store = _store(tmp_path)
    recorder = Recorder(store, "s1")
    recorder.record(ev.TerminalStarted("t-fg", "true", "/w"))
    recorder.record(ev.TerminalExited("t-fg", 0))
    recorder.record(ev.TerminalStarted("t-bg", "serve", "/w"))
    recorder.forget_finished()
    recorder.record(ev.TerminalOutput("t-bg", b"GET /\n"))
    recorder.record(ev.TerminalExited("t-bg", None, "SIGKILL"))
    store.commit_quietly()
    records = dict((key, payload) for key, payload in
                   ((p["terminal_id"], p) for kind, p in store.journal("s1") if kind == "terminal"))
    assert records["t-bg"]["exit"] == {"exit_code": None, "signal": "SIGKILL"}
    assert records["t-bg"]["output"] == "R0VUIC8K"  # base64 of the output
    assert records["t-fg"]["exit"] == {"exit_code": 0, "signal": None}
    store.close()


def test_turns_woken_by_one_delivery_let_the_hub_read_its_input_between_them():
    """Twenty greenlets wait on one store job (twenty turns on one commit); each works
    a few ms once woken. Input that arrives as the first runs is read before the last of them
    resumes: the delivery does not run them all back to back while stdin waits."""
    from gevent import monkey

    from term2acp.sessions.store.worker import Worker

    hold = monkey.get_original("_thread", "allocate_lock")()
    hold.acquire()
    worker = Worker()
    job = worker.submit(None, (), lambda _worker: hold.acquire())
    order = []
    r, w = os.pipe()

    def turn(n):
        job.wait()
        if not order:
            os.write(w, b"x")  # input arrives as the first of them runs
        until = time.perf_counter() + 0.003
        while time.perf_counter() < until:  # a turn's work, on the hub
            pass
        order.append(n)

    def reader():
        gevent.socket.wait_read(r)
        order.append("input")

    try:
        turns = [gevent.spawn(turn, n) for n in range(20)]
        listening = gevent.spawn(reader)
        gevent.idle()
        hold.release()  # the job is done: all twenty are delivered at once
        assert gevent.joinall([*turns, listening], timeout=10) and len(order) == 21
        assert order.index("input") < 20, order
    finally:
        os.close(r)
        os.close(w)
        worker.close()
