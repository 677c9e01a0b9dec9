"""Composition root: endpoint, agent, sessions, signals and the bounded shutdown."""

import logging
import signal

import gevent
from gevent.event import Event
from gevent.pool import Pool

from term2acp.acp.connection import Connection
from term2acp.acp.client import ClientProxy
from term2acp.core import executables
from term2acp.mcp.config import masked_servers
from term2acp.rpc.endpoint import Endpoint
from term2acp.rpc.stream import Writer, open_reader, read_lines
from term2acp.warmup import Warmup

log = logging.getLogger(__name__)

class Server:
    def __init__(self, settings, catalog, in_fd, out_fd):
        self.settings = settings
        self.stop = Event()
        self._tools = None
        self.sandbox_note = None  # set by the probe
        self.catalog = catalog
        # Before each batch of lines the writer commits what they report (the session
        # store's commit_quietly), wired when the session layer is built (_sessions).
        self.writer = Writer(out_fd, on_failure=self._disconnected, discard=_discarded)
        self.pool = Pool(256)
        self.endpoint = Endpoint(None, self.writer.put, self.pool, max_line=settings.max_line_bytes,
                                 send_wait=self.writer.put_wait,
                                 send_quick=self.writer.put_quick,
                                 backlogged=self.writer.backlogged)
        self.agent = Connection(self._sessions, ClientProxy(self.endpoint), settings)
        self.agent.catalog = catalog  # authMethods name its providers' key variables
        self.endpoint.router = self.agent
        self.endpoint.wire_mask = masked_servers
        # The session layer is imported before the first line is read and the store opened
        # in a native thread meanwhile; once initialize is answered, the turn layer and the
        # tools are prepared in that thread (term2acp/warmup.py), then the sandbox is probed
        # (a bwrap run): the first session call finds them ready, the hub is not blocked.
        self.warmup = Warmup(settings, in_flight=lambda: self.pool)
        self.agent.on_initialized = lambda: self.warmup.schedule(
            self.agent.version, self.catalog, then=self._probe_sandbox,
            on_sessions=self.agent.open_face)
        self.agent.before_sessions = self.warmup.wait_sessions
        self.agent.before_turns = self.warmup.wait_turns
        self.in_fd = in_fd

    def _sessions(self):
        """The session manager (SQLite, the agent loop), built with the face once the
        warm-up has imported it (acp/connection.py open_face): initialize does not pay for it."""
        self.warmup.wait_sessions()  # never import what the warm-up thread is importing
        from term2acp.sessions.manager import SessionManager

        manager = SessionManager(self.settings, self.catalog, self.tools, self._sandbox_note,
                                 store=self.warmup.take_store())
        # what a line reports is committed before the line is written: a kill -9 loses
        # nothing the client was told
        self.writer.before_write = manager.store.commit_quietly
        return manager

    @property
    def manager(self):
        return self.agent.manager

    def _sandbox_note(self):
        if self.sandbox_note is None:  # a prompt before the deferred probe: probe now
            self._probe_sandbox()
        return self.sandbox_note

    def tools(self):
        if self._tools is None:
            self.warmup.wait()
            self._tools = self.warmup.take_tools()
        if self._tools is None:
            from term2acp.tools.registry import load_tools

            self._tools = load_tools(self.settings)
        return self._tools

    def _disconnected(self, exc):
        log.info("client went away (%s); shutting down", exc)
        self.endpoint.close()
        self.stop.set()

    def _read(self):
        try:
            for line in read_lines(open_reader(self.in_fd), self.settings.max_line_bytes):
                self.endpoint.receive_line(line)
        except OSError as exc:
            log.warning("reading stdin failed: %s", exc)
        finally:
            self.endpoint.close()
            self.stop.set()

    def _probe_sandbox(self):
        if self.sandbox_note is not None:
            return
        self.warmup.wait()
        from term2acp.sandbox import bwrap

        status = bwrap.probe()
        from term2acp.sandbox import reaper

        reaper.sweep(self.settings.data_dir)  # what agents that died left running
        if status.available:
            self.sandbox_note = ("available: writes only inside the workspace root, no network, "
                                 "credentials hidden")
        else:
            self.sandbox_note = f"unavailable ({status.reason}); shell calls are refused"
            log.warning("%s", status.warning())

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
        self.warmup.start()  # the session layer, before the first line is read
        self.reader = gevent.spawn(self._read)
        self.reader.name = "rpc-reader"
        self.stop.wait()
        self.shutdown(self.reader)
        return 0

    def shutdown(self, reader):
        """Stop reading, cancel work, close sessions, drain the outbox; all bounded."""
        bound = self.settings.shutdown_timeout
        reader.kill(block=False)
        self.endpoint.close()
        self.endpoint.join(timeout=bound * 0.2)  # let requests already received finish
        try:
            if self.manager is not None:
                self.manager.shutdown(bound * 0.7)
        except Exception:  # noqa: BLE001
            log.exception("shutdown failed")
        self.endpoint.cancel_incoming()
        self.endpoint.join(timeout=0.5)
        self.warmup.close(bound * 0.1)
        if not self.writer.drain(bound * 0.2):
            log.warning("could not flush every message to stdout before exiting")

    def yield_sessions(self):
        """SIGUSR2: another process asks for sessions live here (sessions/takeover.py)."""
        manager = self.manager
        if manager is not None:
            gevent.spawn(manager.yield_requested).name = "takeover"


def _discarded(tag):
    """The writer's question for a queued tagged line (a chunk): may it go unsent?"""
    lifecycle, seq = tag
    return lifecycle.dropped(seq)


def _dump_greenlets():
    """SIGUSR1: every greenlet's stack on stderr (greenlets are named like processes)."""
    import os

    from gevent import util

    # Straight to fd 2, not through logging: the dump must work even when a lock is stuck.
    os.write(2, ("term2-acp: greenlet dump:\n" + "\n".join(util.format_run_info()) + "\n").encode())
