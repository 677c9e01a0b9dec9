"""HTTP transports: streamable HTTP (MCP 2025-03-26 and later) and the legacy HTTP+SSE one.

Streamable HTTP: every message is a POST of one JSON-RPC message. A request is answered
with ``application/json`` (the response) or ``text/event-stream`` (events carrying
notifications, server requests and finally the response); notifications and responses
get ``202 Accepted``. The server may assign ``Mcp-Session-Id`` on the initialize answer;
we send it back on every later request, with ``MCP-Protocol-Version``, and DELETE the
session on close. A GET stream, when the server offers one, carries server notifications
such as ``tools/list_changed``.

Legacy SSE (2024-11-05, for ACP v1 clients): a GET opens an event stream whose first
``endpoint`` event names the URL to POST messages to; every answer arrives as a
``message`` event on that stream. Messages are posted only to the SSE URL's own origin
(scheme, host, port), as the official SDKs require: an endpoint elsewhere fails the
server before anything (and so no configured header) is sent there.

Configured headers go to the server only; messages and logs show ``safe_url``. Connections
come from the one network path (``dial.py`` over ``term2acp/net/``: the providers' proxy
and CAs; cooperative under gevent's monkey patch), events from its one SSE decoder. Each
POST has its own connection: kept-alive connections measured several times slower
against uvicorn (Nagle on the server's separate writes meets our delayed ACKs).
"""

import json
import logging
import urllib.parse

import gevent
import gevent.event

from term2acp.mcp.dial import dial as _connect
from term2acp.mcp.oauth import SignInNeeded
from term2acp.mcp.rpc import McpError, ServerGone, TooLarge, too_large
from term2acp.net import sse
from term2acp.net.connection import FAILURES
from term2acp.net.errors import EventTooLarge

log = logging.getLogger(__name__)

# Per socket operation. Every request is bounded by its own timeout (rpc.Connection), so
# this only has to outlast the slowest tool call: a smaller one would cut long calls.
SOCKET_TIMEOUT = 3600.0
STREAM_IDLE_TIMEOUT = 3600.0  # a quiet event stream is fine; a dead socket is not forever
ERROR_BODY_CAP = 300
MAX_MESSAGE = 16 << 20  # one JSON-RPC message (a body, an event): more fails the server


def origin(url):
    """``(scheme, host, port)`` of an http(s) URL, the default port made explicit."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:  # a port that is not a number: an origin of its own
        port = -1
    return scheme, (parts.hostname or "").lower(), port or {"http": 80, "https": 443}.get(scheme)


def _shown_origin(parts):
    scheme, host, port = parts
    text = f"{scheme}://{host}:{port}"[:200]
    return "".join(c for c in text if c.isprintable())


def sse_events(response):
    """Yield ``(event, data)`` from a text/event-stream response until it ends (an event
    without a name is a ``message``, as the SSE spec says); raises TooLarge for an event
    (or a line) over MAX_MESSAGE."""
    limit = MAX_MESSAGE
    try:
        for event, data in sse.events(response, limit=limit):
            yield event or "message", data
    except EventTooLarge:
        raise too_large("an event", limit) from None


class _HttpBase:
    def __init__(self, config, spawn, credentials=None):
        self.config = config
        self.spawn = spawn
        self.credentials = credentials  # oauth.Credentials of a server we may sign in to
        self.connection = None
        self._stream = None  # the GET event-stream greenlet
        self._closed = False

    def _headers(self, extra):
        headers = dict(self.config.headers)
        headers.update(extra)
        if self.credentials is not None:
            bearer = self.credentials.header()  # refreshed first when about to expire
            if bearer:
                headers["Authorization"] = bearer
        return headers

    def _refreshed(self, used):
        """After a 401 to ``used`` (the Authorization sent): True when one refresh got a new
        token to try again with."""
        if self.credentials is None or not used:
            return False
        try:
            return self.credentials.refresh(used.partition(" ")[2])
        except SignInNeeded:
            return False
        except McpError as exc:
            log.info("mcp %s: token refresh failed: %s", self.config.name, exc)
            return False

    def _unauthorized(self, response):
        response.read(ERROR_BODY_CAP)
        return SignInNeeded(f"{self.config.safe_url}: the server needs a sign-in (HTTP 401)",
                            response.getheader("WWW-Authenticate") or "")

    def _fail(self, what):
        return ServerGone(f"{self.config.safe_url}: {what}")

    def _deliver(self, text, answer_to=None):
        """Hand one JSON body to the connection; True when it answers ``answer_to``."""
        try:
            message = json.loads(text)
        except (ValueError, RecursionError):  # not JSON, or nested past the parser
            log.warning("mcp %s: ignored a body that is not JSON: %r", self.config.name,
                        self.config.redact(text[:200]))
            return False
        self.connection.receive(message)
        return answer_to is not None and isinstance(message, dict) and \
            message.get("id") == answer_to and "method" not in message

    def _stop_stream(self):
        if self._stream is not None:
            self._stream.kill(block=True, timeout=1)
            self._stream = None


class StreamableHttpTransport(_HttpBase):
    def __init__(self, config, spawn, credentials=None):
        super().__init__(config, spawn, credentials)
        self.session_id = None
        self.protocol_version = None

    def open(self, connection):
        self.connection = connection

    def send(self, message):
        if self._closed:
            raise self._fail("the connection was closed")
        body = json.dumps(message, ensure_ascii=False).encode()
        extra = {"Content-Type": "application/json",
                 "Accept": "application/json, text/event-stream"}
        if self.session_id:
            extra["Mcp-Session-Id"] = self.session_id
        if self.protocol_version:
            extra["MCP-Protocol-Version"] = self.protocol_version
        for retry in (False, True):
            conn, target = _connect(self.config.url, SOCKET_TIMEOUT)
            try:
                headers = self._headers(extra)
                conn.request("POST", target, body=body, headers=headers)
                response = conn.getresponse()
                if response.status == 401 and self.credentials is not None:
                    # One refresh and one more try; then the sign-in is the user's to do.
                    if not retry and self._refreshed(headers.get("Authorization")):
                        continue
                    raise self._unauthorized(response)
                self._answer(message, response)
                return
            except TooLarge as exc:
                self.connection.lost(f"{self.config.safe_url}: {exc}")
                raise self._fail(str(exc)) from None
            except FAILURES as exc:
                raise self._fail(f"request failed ({type(exc).__name__}: {exc})") from None
            finally:
                conn.close()

    def _answer(self, message, response):
        if message.get("method") == "initialize":
            self.session_id = response.getheader("Mcp-Session-Id") or self.session_id
            if self.session_id and not (len(self.session_id) <= 1024 and all(
                    "!" <= c <= "~" for c in self.session_id)):  # the spec: visible ASCII
                self.session_id = None
                raise McpError(f"{self.config.safe_url}: the server's Mcp-Session-Id is not "
                               "visible ASCII of at most 1,024 characters")
        if response.status == 404 and self.session_id:
            self.connection.lost(f"{self.config.safe_url}: the server ended the MCP session")
            raise self._fail("the server ended the MCP session")
        if response.status >= 400:
            text = self.config.redact(response.read(ERROR_BODY_CAP).decode("utf-8", "replace"))
            raise McpError(f"{self.config.safe_url}: HTTP {response.status} {response.reason}"
                           + (f": {text}" if text else ""))
        kind = (response.getheader("Content-Type") or "").split(";")[0].strip().lower()
        if "id" not in message or "method" not in message:
            return  # 202 for notifications and our responses; the body is not read
        if kind == "text/event-stream":
            # Notifications and server requests may come first; stop at our answer, since a
            # server may keep the stream open after it.
            for _event, data in sse_events(response):
                if self._deliver(data, answer_to=message["id"]):
                    break
        elif kind == "application/json":
            body = response.read(MAX_MESSAGE + 1)
            if len(body) > MAX_MESSAGE:
                raise too_large("a response", MAX_MESSAGE)
            self._deliver(body.decode("utf-8", "replace"))

    def initialized(self, protocol_version):
        """After the handshake: remember the version and open the GET notification stream."""
        self.protocol_version = protocol_version
        self._stream = self.spawn(self._listen)

    def _listen(self):
        headers = {"Accept": "text/event-stream"}
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        if self.protocol_version:
            headers["MCP-Protocol-Version"] = self.protocol_version
        conn, target = _connect(self.config.url, STREAM_IDLE_TIMEOUT)
        try:
            conn.request("GET", target, headers=self._headers(headers))
            response = conn.getresponse()
            if response.status != 200:
                log.debug("mcp %s: no notification stream (HTTP %s)", self.config.name, response.status)
                return
            for _event, data in sse_events(response):
                self._deliver(data)
        except TooLarge as exc:
            self.connection.lost(f"{self.config.safe_url}: {exc}")
        except FAILURES as exc:
            log.info("mcp %s: notification stream ended: %s", self.config.name, exc)
        finally:
            conn.close()

    def close(self):
        self._closed = True
        self._stop_stream()
        if self.session_id:
            conn, target = _connect(self.config.url, 2.0)
            try:
                with gevent.Timeout(2.0, False):
                    conn.request("DELETE", target, headers=self._headers(
                        {"Mcp-Session-Id": self.session_id}))
                    conn.getresponse().read()
            except FAILURES as exc:
                log.debug("mcp %s: session DELETE failed: %s", self.config.name, exc)
            finally:
                conn.close()
        if self.connection is not None:
            self.connection.lost("the server was stopped")


class SseTransport(_HttpBase):
    """The HTTP+SSE transport of protocol 2024-11-05."""

    def __init__(self, config, spawn, endpoint_timeout=10.0):
        super().__init__(config, spawn)
        self.endpoint = None
        self.endpoint_timeout = endpoint_timeout
        self._ready = gevent.event.Event()
        self._error = None

    def open(self, connection):
        self.connection = connection
        self._stream = self.spawn(self._listen)
        if not self._ready.wait(self.endpoint_timeout):
            raise self._fail("no endpoint event on the SSE stream")
        if self.endpoint is None:
            raise self._fail(self._error or "the SSE stream ended before the endpoint event")

    def _listen(self):
        conn, target = _connect(self.config.url, STREAM_IDLE_TIMEOUT)
        reason = "the SSE stream ended"
        try:
            conn.request("GET", target, headers=self._headers({"Accept": "text/event-stream"}))
            response = conn.getresponse()
            if response.status != 200:
                reason = self._error = f"HTTP {response.status} {response.reason}"
                return
            for event, data in sse_events(response):
                if event == "endpoint" and self.endpoint is None:
                    endpoint = urllib.parse.urljoin(self.config.url, data.strip())
                    if origin(endpoint) != origin(self.config.url):
                        reason = self._error = (
                            "the server named a message endpoint on another origin "
                            f"({_shown_origin(origin(endpoint))}); messages are only sent to "
                            f"the origin of the configured URL ({_shown_origin(origin(self.config.url))})")
                        return
                    self.endpoint = endpoint
                    self._ready.set()
                elif event == "message":
                    self._deliver(data)
        except TooLarge as exc:
            reason = self._error = str(exc)
        except FAILURES as exc:
            reason = self._error = f"{type(exc).__name__}: {exc}"
        finally:
            conn.close()
            self._ready.set()
            if not self._closed:
                self.connection.lost(f"{self.config.safe_url}: {reason}")

    def send(self, message):
        if self._closed or self.endpoint is None:
            raise self._fail("the connection was closed")
        conn, target = _connect(self.endpoint, SOCKET_TIMEOUT)
        try:
            conn.request("POST", target, body=json.dumps(message, ensure_ascii=False).encode(),
                         headers=self._headers({"Content-Type": "application/json"}))
            response = conn.getresponse()
            text = self.config.redact(response.read(ERROR_BODY_CAP).decode("utf-8", "replace"))
            if response.status >= 400:
                raise McpError(f"{self.config.safe_url}: HTTP {response.status} {response.reason}"
                               + (f": {text}" if text else ""))
        except FAILURES as exc:
            raise self._fail(f"request failed ({type(exc).__name__}: {exc})") from None
        finally:
            conn.close()

    def initialized(self, protocol_version):
        pass

    def close(self):
        self._closed = True
        self._stop_stream()
        if self.connection is not None:
            self.connection.lost("the server was stopped")
