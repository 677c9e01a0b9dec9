"""One running language server: its sandboxed process and the protocol over its pipes.

The process is ``sandbox.start`` (bubblewrap: no network but its own loopback, the
workspace, a private home and ``/tmp`` that go with it, its installation read-only; a
parent-death signal and ``--die-with-parent``, so it ends with the agent, ``kill -9``
included); its stdout is pumped by ``sandbox/process.py`` into :class:`_Pipe`, its stderr
comes through a pipe of its own (the last lines explain a crash). The protocol is pygls's
(``pygls.io_.run`` reads the ``Content-Length`` framing in a greenlet, the client's
protocol matches responses and structures them with the ``lsprotocol`` types); pygls and
lsprotocol are imported with the first server, in a thread of gevent's pool (about
300 ms of imports that must not hold the hub).

Every wait is bounded by its caller's timeout and ends early when the server is gone; a
request that times out is cancelled (``$/cancelRequest``); a write cut by a timeout (a
server that no longer reads) kills the server, since its framing is broken.
"""

import collections
import itertools
import logging
import os
import pathlib
import time

import gevent
import gevent.event
import gevent.lock
import gevent.os
from gevent.socket import wait_read

from term2acp import sandbox
from term2acp.lsp import servers, wire

log = logging.getLogger(__name__)
logging.getLogger("pygls").setLevel(logging.ERROR)  # it logs every message at INFO

SETTLE = 0.2  # seconds unversioned diagnostics must stay unchanged to count as complete
STDERR_KEEP = 5
MAX_OPEN = 50  # documents kept open in one server (their text kept too); the oldest closes
QUIET = ("window/logMessage", "window/showMessage", "$/progress", "telemetry/event",
         "$/logTrace", "$/typescriptVersion")
ANSWERS = {"window/workDoneProgress/create": None, "client/registerCapability": None,
           "client/unregisterCapability": None, "window/showMessageRequest": None,
           "window/showDocument": None}

_library = []


class ServerGone(Exception):
    """The server exited, was stopped, or broke the protocol; the message says how."""


class TimedOut(Exception):
    """The server did not answer in time (it keeps running)."""


def library():
    """``(pygls.client, pygls.io_, converter factory)``, imported once off the hub."""
    if not _library:
        def load():
            import pygls.client
            import pygls.io_

            return pygls.client, pygls.io_, wire.plain_json(pygls.protocol)
        loaded = gevent.get_hub().threadpool.apply(load)
        if not _library:
            _library.append(loaded)
    return _library[0]


def uri_of(path):
    return pathlib.Path(path).as_uri()


def path_of(uri):
    if not uri.startswith("file://"):
        return uri
    from urllib.parse import unquote, urlparse

    return unquote(urlparse(uri).path)


class Connection:
    def __init__(self, found, root, settings):
        self.spec, self.root = found.spec, root
        self.name = found.spec.name
        self._argv, self._settings = found.argv, servers.sandbox_settings(settings, found.visible)
        self.process = self.client = self.capabilities = None
        self.gone = None  # why it is gone, once it is
        self.lost = gevent.event.Event()
        self.docs = collections.OrderedDict()  # uri -> [version, text]
        self.published = {}  # uri -> (seq, version, monotonic time, diagnostics)
        self.stderr_tail = collections.deque(maxlen=STDERR_KEEP)
        self._seq, self._news = 0, gevent.event.Event()
        self._ids = itertools.count(1)
        self._pipe, self._write_lock = wire.Pipe(), gevent.lock.Semaphore()
        self._greenlets, self._stopping = [], False

    @property
    def pid(self):
        return self.process.pid if self.process is not None else None

    # ------------------------------------------------------------ start and stop
    def start(self, timeout):
        """Launch and initialize; raises ServerGone or TimedOut (then call :meth:`stop`)."""
        client_module, io_, converter = library()
        client = self.client = client_module.JsonRPCClient(converter_factory=converter)
        client.feature("textDocument/publishDiagnostics")(lambda params: self._on_diagnostics(params))
        client.feature("workspace/configuration")(
            lambda params: [None] * len((params or {}).get("items") or ()))
        client.feature("workspace/workspaceFolders")(lambda params: [self._folder()])
        for method, answer in ANSWERS.items():
            client.feature(method)(lambda params, answer=answer: answer)
        for method in QUIET:
            client.feature(method)(lambda params: None)
        client.protocol.set_writer(wire.Writer(self))
        read_end, write_end = os.pipe()
        try:
            self.process = sandbox.start(self._argv, self.root, self._settings,
                                         on_output=self._pipe.feed, on_exit=self._exited,
                                         network=False, stderr=write_end)
        except (sandbox.SandboxUnavailable, sandbox.Refused, sandbox.LaunchError,
                sandbox.LoopbackError, OSError) as exc:
            os.close(read_end)
            raise ServerGone(f"{self.name} could not start: {exc}") from None
        finally:
            os.close(write_end)
        log.info("lsp %s: started pid %s in %s", self.name, self.process.pid, self.root)
        gevent.os.make_nonblocking(read_end)
        self._greenlets = [gevent.spawn(self._read_stderr, read_end),
                           gevent.spawn(self._read, io_, client)]
        result = self.request("initialize", {
            "processId": None, "clientInfo": {"name": "term2acp"}, "rootUri": uri_of(self.root),
            "rootPath": self.root, "workspaceFolders": [self._folder()],
            "capabilities": wire.CAPABILITIES, "initializationOptions": self.spec.init_options or None},
            timeout)
        self.capabilities = (result or {}).get("capabilities") or {}
        client.protocol.notify("initialized", {})

    def _folder(self):
        return {"uri": uri_of(self.root), "name": os.path.basename(self.root)}

    def stop(self, wait=True):
        """Kill the server's whole sandbox (idempotent). ``wait``: until it is reaped and
        its readers are done (bounded); else only the kill, without yielding (a session's
        release: its pump reaps it and the readers end at the pipes' end by themselves)."""
        self._stopping = True
        self._lose("the server was stopped")
        if self.process is not None and not wait:
            self.process.kill(wait=False)
            return
        if self.process is not None:
            self.process.kill()
        self._pipe.close()
        for greenlet in self._greenlets:
            greenlet.kill(block=True, timeout=1)

    def _exited(self, outcome):
        how = f"exited with status {outcome.exit_code}" if outcome.exit_code is not None \
            else f"was killed ({outcome.signal})"
        if not self._stopping:
            log.warning("lsp %s: the server %s", self.name, how)
        self._pipe.close()
        self._lose(self._reason(f"{self.name} {how}"))

    def _lose(self, reason):
        if self.gone is None:
            self.gone = reason
        self.lost.set()
        self._wake()

    def _reason(self, what):
        if self.stderr_tail:
            return f"{what}; its last output: {' | '.join(self.stderr_tail)}"
        return what

    # ------------------------------------------------------------ reading
    def _read(self, io_, client):
        try:
            io_.run(client._stop_event, self._pipe, client.protocol, log)
        except wire.TooLarge:
            self._lose(f"{self.name} sent a message over {wire.MAX_MESSAGE >> 20} MiB")
            if self.process is not None:
                self.process.kill()
        self._lose(self._reason(f"{self.name} closed its output"))

    def _read_stderr(self, fd):
        pending = b""
        try:
            while True:
                wait_read(fd)
                try:
                    data = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if not data:
                    return
                *lines, pending = (pending + data).split(b"\n")
                pending = pending[-4096:]
                for line in lines:
                    text = line.decode("utf-8", "replace").strip()[:300]
                    if text:
                        self.stderr_tail.append(text)
                        log.debug("lsp %s stderr: %s", self.name, text)
        finally:
            os.close(fd)

    def _on_diagnostics(self, params):
        if not isinstance(params, dict) or not isinstance(params.get("uri"), str):
            return
        items = [d for d in params.get("diagnostics") or () if wire.is_diagnostic(d)]
        self._seq += 1
        version = params.get("version")
        self.published[params["uri"]] = (self._seq, version if isinstance(version, int) else None,
                                         time.monotonic(), items)
        self._wake()

    def _wake(self):
        news, self._news = self._news, gevent.event.Event()
        news.set()

    # ------------------------------------------------------------ requests
    def request(self, method, params, timeout):
        """The result of one request (JSON); raises ServerGone, TimedOut, or pygls's
        ``JsonRpcException`` for an error answer."""
        if self.gone is not None:
            raise ServerGone(self.gone)
        msg_id = next(self._ids)
        protocol = self.client.protocol
        future = protocol.send_request(method, params, msg_id=msg_id)
        done = gevent.event.Event()
        future.add_done_callback(lambda _future: done.set())
        try:
            gevent.wait([done, self.lost], count=1, timeout=timeout)
        finally:
            if not future.done():
                protocol._request_futures.pop(msg_id, None)
                protocol._result_types.pop(msg_id, None)
                if self.gone is None:
                    protocol.notify("$/cancelRequest", {"id": msg_id})
        if not future.done():
            if self.gone is not None:
                raise ServerGone(self.gone)
            raise TimedOut(f"{self.name} did not answer {method} within {timeout:g} s")
        return future.result()

    def notify(self, method, params):
        if self.gone is not None:
            raise ServerGone(self.gone)
        self.client.protocol.notify(method, params)

    # ------------------------------------------------------------ documents
    def sync(self, path, text):
        """Give the server ``text`` as the content of ``path``; ``(uri, version, seq)``:
        publishes after ``seq`` are about this content or later."""
        uri = uri_of(path)
        doc, seq = self.docs.get(uri), self._seq
        if doc is None:
            self.docs[uri] = doc = [1, text]
            self.notify("textDocument/didOpen", {"textDocument": {
                "uri": uri, "languageId": servers.language_id(path), "version": 1, "text": text}})
            while len(self.docs) > MAX_OPEN:
                self.close_doc(next(iter(self.docs)))
        elif doc[1] != text:
            doc[0], doc[1] = doc[0] + 1, text
            self.notify("textDocument/didChange", {
                "textDocument": {"uri": uri, "version": doc[0]}, "contentChanges": [{"text": text}]})
        else:
            return uri, doc[0], -1  # unchanged: what it published for it stands
        self.docs.move_to_end(uri)
        return uri, doc[0], seq

    def close_doc(self, uri):
        if self.docs.pop(uri, None) is not None and self.gone is None:
            self.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        self.published.pop(uri, None)

    def diagnostics(self, uri, version, seq, deadline):
        """The diagnostics published for ``uri`` after ``seq``: for ``version`` or later
        when the server names versions, else once unchanged for SETTLE; None at
        ``deadline``."""
        while True:
            got = self.published.get(uri)
            now = time.monotonic()
            fresh = got is not None and got[0] > seq and (got[1] is None or got[1] >= version)
            if fresh and (got[1] is not None or now - got[2] >= SETTLE or now >= deadline):
                return got[3]  # a publish naming its version is that version's whole answer
            if now >= deadline:
                return None
            if self.gone is not None:
                raise ServerGone(self.gone)
            wait = deadline - now if not fresh else min(deadline - now, SETTLE - (now - got[2]))
            self._news.wait(max(wait, 0.001))


