"""Composition root: endpoint, ACP connection, sessions, signals and the bounded shutdown."""

import gc
import logging
import os
import signal

import gevent
from gevent import util
from gevent.event import Event
from gevent.pool import Pool

from term2acp.acp.client import ClientProxy
from term2acp.acp.connection import Connection
from term2acp.acp.v1.replay import forms as replay_forms
from term2acp.core import executables, reaper
from term2acp.mcp.config import masked_servers
from term2acp.preload import Preload
from term2acp.rpc.endpoint import Endpoint
from term2acp.rpc.peer import Peer
from term2acp.rpc.stream import Writer, open_reader, read_lines
from term2acp.sessions.errors import StoreError
from term2acp.sessions.manager import SessionManager
from term2acp.sessions.store import store_for

log = logging.getLogger(__name__)
# Seconds a thread of the pool (the preload's imports, a store batch) may hold the
# interpreter before the hub gets it back, and the longest run of the hub's callbacks
# before it polls for I/O (gevent.setswitchinterval). Python's default, 5 ms, let a
# thread importing modules hold the hub up to 5 ms at each of its system calls.
SWITCH_INTERVAL = 0.001


class Server:
    """The composition root: every object built whole, in the order they need each other."""

    def __init__(self, settings, catalog, in_fd, out_fd):
        self.settings = settings
        self.catalog = catalog
        self.in_fd = in_fd
        self.stop = Event()
        self.pool = Pool(256)
        store = store_for(settings, replay_forms)  # journal updates stored encoded
        # what a line reports is committed before the line is written: a kill -9 loses
        # nothing the client was told
        self.writer = Writer(out_fd, on_failure=self._disconnected, discard=_discarded,
                             before_write=store.commit_quietly)
        # What only prompts need is prepared in a thread (preload.py); the session layer
        # waits for it before a turn starts.
        self.preload = Preload(settings, catalog, self.writer.wait_flushed)
        self.manager = SessionManager(settings, catalog, self.preload.tools,
                                      self.preload.sandbox_note, store=store,
                                      turns_ready=self.preload.wait)
        self.peer = Peer(self.writer.put, send_wait=self.writer.put_wait,
                         send_quick=self.writer.put_quick)
        # the face's routes wait (in their own greenlets) until the store is open
        self.connection = Connection(self.manager, ClientProxy(self.peer), settings, catalog,
                                     sessions_ready=self._store_opened)
        self.endpoint = Endpoint(self.connection, self.peer, self.pool,
                                 max_line=settings.max_line_bytes,
                                 backlogged=self.writer.backlogged, wire_mask=masked_servers)
        self._opener = None  # opens the session store, from before the first line is read

    def _open_store(self):
        """Open the session store (its own thread does the work) while the first lines are
        served. A damaged file moved aside is told by the first session call, which also
        reports a store that could not be opened (it tries again)."""
        try:
            self.manager.store.open(tell=False)
        except StoreError:
            log.debug("opening the session store failed; the first session call retries",
                      exc_info=True)

    def _store_opened(self):
        if self._opener is not None:
            self._opener.join()

    def _disconnected(self, exc):
        log.info("client went away (%s); shutting down", exc)
        self.peer.close()
        self.stop.set()

    def _read(self):
        try:
            for line in read_lines(open_reader(self.in_fd), self.settings.max_line_bytes):
                self.endpoint.receive_line(line)
        except OSError as exc:
            log.warning("reading stdin failed: %s", exc)
        finally:
            self.peer.close()
            self.stop.set()

    def run(self, signals=True):
        """Serve until EOF, a disconnect or (with ``signals``, the process's own agent)
        SIGINT/SIGTERM; returns the exit status. A server that does not own its process
        (the test kit's in-process agents) leaves the signals to the process."""
        # The programs the agent starts outside the sandbox (bwrap, bare MCP commands) come
        # from the PATH it started with, bwrap's found now: before any model turn can plant one
        executables.pin_environment()
        executables.find("bwrap")
        if signals:
            for signum in (signal.SIGINT, signal.SIGTERM):
                gevent.signal_handler(signum, self.stop.set)
            gevent.signal_handler(signal.SIGUSR1, _dump_greenlets)
            gevent.signal_handler(signal.SIGUSR2, self.yield_sessions)  # sessions/takeover.py
            gevent.spawn(_settle_heap, self.preload).name = "settle-heap"
            gevent.setswitchinterval(SWITCH_INTERVAL)
        self._opener = gevent.spawn(self._open_store)
        self._opener.name = "store-opener"
        gevent.spawn(reaper.sweep, self.settings.data_dir).name = "reaper"  # what dead agents left
        self.reader = gevent.spawn(self._read)
        self.reader.name = "rpc-reader"
        self.stop.wait()
        self.shutdown(self.reader)
        return 0

    def shutdown(self, reader):
        """Stop reading, cancel work, close sessions, drain the outbox; all bounded."""
        bound = self.settings.shutdown_timeout
        reader.kill(block=False)
        self.peer.close()
        self.endpoint.join(timeout=bound * 0.2)  # let requests already received finish
        self.preload.close(bound * 0.1)
        self._opener.join(bound * 0.1)
        try:
            self.manager.shutdown(bound * 0.7)
        except Exception:  # noqa: BLE001
            log.exception("shutdown failed")
        self.endpoint.cancel_incoming()
        self.endpoint.join(timeout=0.5)
        if not self.writer.drain(bound * 0.2):
            log.warning("could not flush every message to stdout before exiting")

    def yield_sessions(self):
        """SIGUSR2: another process asks for sessions live here (sessions/takeover.py)."""
        gevent.spawn(self.manager.yield_requested).name = "takeover"


def _discarded(tag):
    """The writer's question for a queued tagged line (a chunk): may it go unsent?"""
    lifecycle, seq = tag
    return lifecycle.dropped(seq)


def _settle_heap(preload):
    """Once the preload has imported what sessions use, the objects made so far (modules,
    schemas, the catalog: nearly all of them live as long as the process) leave the
    garbage collector's generations (``gc.freeze``): a full collection, which a long
    session's allocations trigger now and then, no longer walks them, and it held the hub
    about 20 ms a time in a 20-session stream. Done when the tools are loaded (before the
    prompts that waited for them go on: this greenlet waits first) and again when the rest
    of the preload (the web page converter) is loaded. Only the agent that owns its
    process does this (the test kit's in-process agents share theirs)."""
    for loaded in (preload.ready, preload.done):
        loaded.wait()
        gc.collect(1)  # the young garbage goes first; what is frozen is never collected
        gc.freeze()


def _dump_greenlets():
    """SIGUSR1: every greenlet's stack on stderr (greenlets are named like processes)."""
    # Straight to fd 2, not through logging: the dump must work even when a lock is stuck.
    os.write(2, ("term2-acp: greenlet dump:\n" + "\n".join(util.format_run_info()) + "\n").encode())
