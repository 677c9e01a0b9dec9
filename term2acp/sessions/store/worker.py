"""The store thread: one native thread with its own SQLite connection runs the store's
jobs in the order they were submitted; the greenlets that wait for a job wait
cooperatively on the hub and are switched to when it is delivered.

A job is one trip: a batch of writes (one transaction) and then one operation
(``op(worker, *args)``, e.g. a read). Nothing holds the write lock between jobs, so
several processes may share the file.
"""

import sqlite3
from collections import deque

from gevent import get_hub, monkey
from gevent.hub import Waiter

from term2acp.core.pacing import POLL, overdue
from term2acp.sessions.errors import StoreError

# The store thread is a real thread even under monkey-patching (threading.Thread would be
# a greenlet), fed by a native queue (_queue.SimpleQueue is never patched; its get()
# releases the GIL).
_start_thread = monkey.get_original("_thread", "start_new_thread")
_native_lock = monkey.get_original("_thread", "allocate_lock")
_native_id = monkey.get_original("_thread", "get_native_id")
try:
    from _queue import SimpleQueue as _NativeQueue
except ImportError:  # pragma: no cover - CPython always has it
    from queue import SimpleQueue as _NativeQueue  # noqa: N813


FEW = 3  # waiters of one delivery always run back to back (Worker._wake)
THREAD_NAME = "term2-store"  # what ps -L, top -H and /proc/<pid>/task/*/comm show


def _name_this_thread(name):
    """Linux names the thread (its ``comm``) for whoever looks at the process."""
    try:
        with open(f"/proc/self/task/{_native_id()}/comm", "w") as fh:
            fh.write(name)
    except OSError:
        pass


class Job:
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


class Worker:
    """One native thread with the store's connection: runs jobs in the order submitted.

    Hub side: :meth:`submit` (never blocks) and :meth:`_deliver` (an async watcher's
    callback: wakes the waiters, notes the sessions whose changes a failed batch lost).
    Thread side: :meth:`_serve`. It holds no reference to the store, so a store dropped
    without ``close()`` stops its thread through a finalizer (:meth:`stop`).
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
        self._async = get_hub().loop.async_()
        self._async.start(self._deliver)
        self._async.ref = False  # keeps the loop alive only while a job is out
        _start_thread(self._serve, ())

    # ------------------------------------------------------------ hub side
    def submit(self, batch, sids, op, args=()):
        """The :class:`Job` that carries ``batch`` (writes of the sessions ``sids``) and
        then ``op(worker, *args)``, queued for the thread; never blocks. Jobs run in the
        order submitted."""
        job = Job(batch, sids, op, args)
        self._outstanding += 1
        if self._outstanding == 1:
            self._async.ref = True
        self._jobs.put(job)
        return job

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
        if not self.alive:
            self._async.close()
        if woken is not None:
            self._wake(woken)

    def _wake(self, woken, timer=None):
        """Switch to each waiter in turn (each runs until it waits again; the first always
        does). While more than ``FEW`` are left and the hub is overdue for a look at its
        I/O, the rest are woken after it has had one: twenty turns waiting on one commit
        ran back to back, ~20 ms without stdin being read. A few are simply run: putting
        them off costs each a turn of the loop (a prompt's answer waited ~2 ms behind its
        streaming turn)."""
        if timer is not None:
            timer.close()
        for n, waiter in enumerate(woken):
            if n and len(woken) - n > FEW and overdue():
                later = get_hub().loop.timer(POLL)
                later.start(self._wake, woken[n:], later)
                return
            waiter.switch(None)

    def close(self):
        """Close the connection and end the thread after the jobs queued (waits
        cooperatively; then, bounded, for the thread's last instructions)."""
        self.submit(None, (), _close).wait()
        if self.exited.acquire(timeout=1.0):
            self.exited.release()  # stays free: "this thread has ended"

    def stop(self):
        """Without waiting (a finalizer): end the thread after the jobs queued."""
        if self.alive:
            self._jobs.put(None)

    # ------------------------------------------------------------ thread side
    def _serve(self):
        try:
            _name_this_thread(THREAD_NAME)
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


def _close(worker):
    """The close job's operation (in the thread): the thread ends after it."""
    worker._close_db()
