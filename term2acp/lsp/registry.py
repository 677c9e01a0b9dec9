"""A session's language servers: one per session root and server, started on the first
write or code call for a file of its language, shared by the session's calls, and stopped
with the session (``sessions/manager.py``'s release: close, delete, idle close, takeover,
shutdown: :meth:`SessionServers.close`).

A server starts in a greenlet of its own, bounded by ``[lsp] request_timeout``: a caller
waits for it only until its own deadline (a write's diagnostics, a code call), so a slow
start is not wasted and a hung one holds nobody. A server that exits, or fails to start,
is started again once; the second time it is off for the session (:class:`Off` says so),
while writes go on working.
"""

import logging
import time

import gevent
import gevent.event

from term2acp.lsp import servers

log = logging.getLogger(__name__)

class NoServer(Exception):
    """No server for the file; the message names the ones looked for."""


class Off(Exception):
    """The server is off for this session; the message says why."""


class Waiting(Exception):
    """The server is still starting at the caller's deadline."""


class SessionServers:
    """A session's servers, a :class:`Servers` per root (the session's, an overlay's copy),
    made on first use. The session owns it (``LiveSession.language_servers``, handed to
    tool calls as ``ctx.language_servers``) and closes it with itself."""

    def __init__(self):
        self.groups = {}  # root -> Servers
        self.closed = False

    def of(self, root, settings):
        found = self.groups.get(root)
        if found is None:
            found = self.groups[root] = Servers(root, settings)
            if self.closed:
                found.close()  # its servers are off: "the session is closed"
        return found

    def close(self):
        """Stop every server (nothing when it had none)."""
        self.closed = True
        for group in list(self.groups.values()):
            group.close()


class _Entry:
    def __init__(self):
        self.conn = None  # the Connection, once started (or failed)
        self.starting = None  # the greenlet starting it
        self.ready = gevent.event.Event()
        self.failures = 0
        self.off = None  # why it is off for the session


class Servers:
    def __init__(self, root, settings):
        self.root, self.settings = root, settings
        self.entries = {}  # server name -> _Entry
        self.closed = False

    def connection(self, path, deadline):
        """The running server for ``path``, started if need be and waited for until
        ``deadline`` (``time.monotonic``). Raises NoServer, Off or Waiting."""
        try:
            found, looked = servers.lookup(path, self.root, self.settings)
        except servers.Unusable as exc:
            raise Off(str(exc)) from None
        if found is None:
            kind = f".{servers.extension(path)} files" if servers.extension(path) else "this file"
            if not looked:
                raise NoServer(f"no language server serves {kind} (none is configured for them)")
            raise NoServer(f"no language server for {kind} was found on the agent's PATH "
                           f"(looked for: {', '.join(looked)})")
        name = found.spec.name
        entry = self.entries.setdefault(name, _Entry())
        if self.closed:
            raise Off("the session is closed")
        if entry.off is None and entry.ready.is_set() and entry.conn.gone is not None:
            self._failed(entry, name, entry.conn.gone)
        if entry.off is not None:
            raise Off(entry.off)
        if not entry.ready.is_set() and entry.starting is None:
            entry.starting = gevent.spawn(self._start, entry, found)
        if not entry.ready.wait(max(0.0, deadline - time.monotonic())):
            raise Waiting(f"{name} is still starting")
        if entry.off is not None:
            raise Off(entry.off)
        if entry.conn.gone is not None:  # it died while the caller waited: next time
            raise Off(f"{name} stopped: {entry.conn.gone}; it is started again on next use")
        return entry.conn

    def _start(self, entry, found):
        from term2acp.lsp.connection import Connection, ServerGone, TimedOut

        conn = entry.conn = Connection(found, self.root, self.settings)  # close() stops it
        try:
            conn.start(self.settings.lsp.request_timeout)
        except (ServerGone, TimedOut) as exc:
            conn.stop()
            conn.gone = str(exc)
        except Exception as exc:  # noqa: BLE001 - a broken server is a failed start
            log.exception("lsp %s: start failed", found.spec.name)
            conn.stop()
            conn.gone = f"{found.spec.name} could not start: {type(exc).__name__}: {exc}"
        entry.starting = None
        if self.closed:
            conn.stop()
        entry.ready.set()

    def _failed(self, entry, name, why):
        """``entry``'s server is gone: restart it once, else turn it off."""
        entry.failures += 1
        entry.conn.stop()
        if entry.failures >= 2:
            entry.off = (f"{name} stopped twice ({why}), so it is off for this session; "
                         "edits still work, without its diagnostics")
            log.warning("lsp %s: off for the session: %s", name, why)
        else:
            log.warning("lsp %s: %s; starting it again", name, why)
            entry.ready.clear()

    def close(self):
        """Kill every server at once, without yielding: a session's release goes on as it
        did without them (each winds down by itself once killed)."""
        self.closed = True
        for entry in self.entries.values():
            if entry.starting is not None:
                entry.starting.kill(block=False)
            if entry.conn is not None:
                entry.conn.stop(wait=False)
            entry.ready.set()
            entry.off = entry.off or "the session is closed"
