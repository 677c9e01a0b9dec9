"""The providers' HTTP client: JSON requests and streamed answers over the one network path.

Why not the SDKs: importing ``openai`` or ``anthropic`` costs most of a second or more and
tens of MB, and the import runs on the gevent hub, so the first turn
could not be cancelled.
Connections, proxies, TLS and the retry delays are ``term2acp/net/``'s (as for
``web_fetch`` and MCP); this client keeps what users relied on in the SDKs:

* base URL (OpenAI-compatible servers), API-key and custom headers;
* timeouts: ``connect`` for connecting (proxy tunnel and TLS handshake included), ``read``
  for each wait on the socket (an idle stream, not a long answer);
* retries, one layer only: 408/409/429/5xx and transport failures before any response
  byte, at most ``max_retries`` times, exponential backoff with jitter (0.5 s doubling, 8 s
  cap) or the server's ``retry-after-ms``/``Retry-After`` when it is at most 60 s;
  ``x-should-retry`` decides when present. The wait is a ``gevent.sleep``, so cancel ends
  it; each retry is announced as a :class:`~term2acp.providers.base.Retrying` event;
* typed errors (``errors.py``): 401/403 name the key variable, 429, context overflow, other
  statuses with the server's message, transport failures with the URL;
* one idle keep-alive connection reused per client (a stale one is replaced silently).

Cancel: the turn greenlet is killed at a socket wait or a yield; :meth:`Response.close`
in the provider's ``finally`` closes the connection, which the server sees at once.
"""

import json
import logging
import time

import gevent

from term2acp import __version__
from term2acp.core import secrets
from term2acp.net.address import Target
from term2acp.net.connection import (
    FAILURES,
    STALE,
    backoff,
    connection,
    no_delay,
    reason,
    retry_after,
    transient,
)
from term2acp.net.errors import BadURL
from term2acp.providers.base import ProviderNotConfigured, Retrying
from term2acp.providers.errors import (
    AuthenticationFailed,
    ConnectionFailed,
    ContextOverflow,
    ProviderHTTPError,
    RateLimited,
    error_code,
    is_overflow,
    scrub,
    server_message,
)

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 409, 429}) | frozenset(range(500, 600))
RATE_STATUSES = frozenset({429, 529})
IDLE_REUSE = 30.0  # seconds an idle keep-alive connection is trusted
ERROR_BODY_LIMIT = 1 << 20
USER_AGENT = f"term2acp/{__version__}"


# ---------------------------------------------------------------- responses
class Response:
    """A streaming 200 response; :meth:`close` returns or closes its connection."""

    def __init__(self, client, conn, raw, url):
        self._client, self._conn, self.raw, self.url = client, conn, raw, url

    def read1(self, size):
        return self.raw.read1(size)

    def close(self):
        if self._conn is None:
            return
        conn, self._conn = self._conn, None
        if self.raw.isclosed() and not self.raw.will_close:
            self._client.release(conn)
        else:
            conn.close()


# ---------------------------------------------------------------- the client
_SECRET_HEADER = ("authorization", "key", "token", "secret", "cookie", "auth")


def _checked(headers, label):
    """Header values as http.client sends them: surrounding whitespace (a pasted line
    break) stripped; a control character inside refused (ProviderNotConfigured naming the
    header, never its value). Secret-shaped ones are masked everywhere from now on."""
    out = {}
    for name, value in headers.items():
        secret = any(part in name.lower() for part in _SECRET_HEADER)
        try:
            out[name] = secrets.clean(str(value), f"the {name} header", secret)
        except secrets.SecretInvalid as exc:
            raise ProviderNotConfigured(f"{label}: {exc}") from None
    return out


class HTTPClient:
    """POSTs JSON and opens the streamed answer, with retries and typed errors.

    ``label`` prefixes every error message (the provider's name); ``key_hint`` names
    the variable holding the key in authentication errors; ``secret`` is scrubbed from
    every message.
    """

    def __init__(self, base_url, headers, label, key_hint, secret, connect_timeout=15.0,
                 read_timeout=600.0, max_retries=2, sign=None):
        try:
            self.target = Target(base_url)
        except BadURL as exc:
            raise ProviderNotConfigured(str(exc)) from None
        # sign(method, url, body, headers) -> the headers a request carries besides
        # ``headers`` (a signature, a fresh token), made again for every attempt
        self.sign = sign
        self.headers = {"Content-Type": "application/json", "Accept": "text/event-stream",
                        "User-Agent": USER_AGENT, **_checked(headers, label)}
        self.label, self.key_hint, self.secret = label, key_hint, secret
        self.connect_timeout = min(connect_timeout, read_timeout)
        self.read_timeout, self.max_retries = read_timeout, max_retries
        self._idle = None  # (connection, released at)

    def stream(self, path, payload):
        """Generator: yields Retrying events, returns the open :class:`Response`."""
        body = json.dumps(payload).encode()
        url = self.target.url(path)
        attempt = 0
        while True:
            try:
                return self._attempt(path, body, url)
            except _Retryable as failure:
                if attempt >= self.max_retries or failure.allowed is False:
                    failure.error.retry_after = failure.delay  # the server's ask, if it said
                    raise failure.error from None
                attempt += 1
                delay = failure.delay if failure.delay is not None else backoff(attempt)
                log.info("%s: %s; retry %d/%d in %.2f s", self.label, failure.reason, attempt,
                         self.max_retries, delay)
                yield Retrying(attempt, delay, failure.reason)
                gevent.sleep(delay)

    def get_json(self, path, timeout=10.0):
        """GET ``path`` and decode its JSON body (e.g. ``/models``): one attempt, its own
        connection, every socket wait bounded by ``timeout``; typed errors as for streams."""
        return self.call("GET", path, None, timeout)

    def call(self, method, path, payload=None, timeout=10.0):
        """One plain JSON exchange (``payload`` the body, or None): the decoded answer (None
        for an empty one); one attempt on its own connection, every wait bounded by
        ``timeout``; an error status is the typed error with the server's message."""
        body = None if payload is None else json.dumps(payload).encode()
        headers = {k: v for k, v in self.headers.items()
                   if body is not None or k != "Content-Type"}
        headers["Accept"] = "application/json"
        if self.sign is not None:
            headers.update(self.sign(method, self.target.url(path), body or b"", headers))
        status, reason, _headers, data = self.exchange(method, path, body, headers, timeout)
        if not 200 <= status < 300:
            try:
                detail = json.loads(data) if data else None
            except ValueError:
                detail = None
            raise self.status_error(status, detail, f"HTTP {status} {reason}")
        try:
            return json.loads(data) if data.strip() else None
        except ValueError as exc:
            raise self._transport_error(self.target.url(path), exc) from None

    def exchange(self, method, path, body, headers, timeout=10.0):
        """One request with exactly ``headers`` (and our User-Agent): ``(status, reason,
        headers, body)``, whatever the status; its own connection, every wait bounded."""
        url = self.target.url(path)
        try:
            conn = self._connect(url)
        except _Retryable as failure:
            raise failure.error from None
        try:
            conn.sock.settimeout(timeout)
            conn.request(method, self.target.path(path), body,
                         {"User-Agent": USER_AGENT, **headers})
            raw = conn.getresponse()
            data = raw.read(ERROR_BODY_LIMIT * 8)
            return raw.status, raw.reason, {k.lower(): v for k, v in raw.getheaders()}, data
        except FAILURES as exc:
            raise self._transport_error(url, exc) from None
        finally:
            conn.close()

    def release(self, conn):
        old, self._idle = self._idle, (conn, time.monotonic())
        if old is not None:
            old[0].close()

    def close(self):
        if self._idle is not None:
            self._idle[0].close()
            self._idle = None

    # ------------------------------------------------------------ one attempt
    def _attempt(self, path, body, url):
        """One request; returns the open 200 :class:`Response` or raises ``_Retryable``.
        Whatever ends it early (a failure, or the turn killed while it waits for the
        answer) closes the connection."""
        conn, raw = self._reusable(), None
        if conn is not None:
            raw = self._exchange(conn, path, body, url, stale_ok=True)
        if raw is None:  # no idle connection, or the server had closed it: no retry used
            conn = self._connect(url)
            raw = self._exchange(conn, path, body, url, stale_ok=False)
        if raw.status == 200:
            return Response(self, conn, raw, url)
        try:
            failure = self._status_failure(raw)
        finally:
            conn.close()
        raise failure

    def _exchange(self, conn, path, body, url, stale_ok):
        """Send the request and read the response head; None when ``stale_ok`` and the
        kept-alive connection turned out closed."""
        try:
            headers = self.headers
            if self.sign is not None:
                headers = {**headers, **self.sign("POST", url, body, headers)}
            conn.request("POST", self.target.path(path), body, headers)
            return conn.getresponse()
        except STALE as exc:
            conn.close()
            if stale_ok:
                return None
            raise _Retryable(self._transport_error(url, exc), reason(exc)) from None
        except FAILURES as exc:
            conn.close()
            raise _Retryable(self._transport_error(url, exc), reason(exc)) from None
        except BaseException:
            conn.close()
            raise

    def _reusable(self):
        idle, self._idle = self._idle, None
        if idle is None:
            return None
        conn, since = idle
        if time.monotonic() - since > IDLE_REUSE:
            conn.close()
            return None
        return conn

    def _connect(self, url):
        try:
            conn, proxy = connection(self.target, self.connect_timeout)
        except BadURL as exc:
            raise ConnectionFailed(f"{self.label}: {exc}") from None
        try:
            conn.connect()
        except FAILURES as exc:
            conn.close()
            via = f" (via proxy {proxy[0]}:{proxy[1]})" if proxy else ""
            error = self._transport_error(url, exc, via)
            raise _Retryable(error, reason(exc), allowed=transient(exc)) from None
        except BaseException:  # killed while connecting
            conn.close()
            raise
        no_delay(conn)
        conn.sock.settimeout(self.read_timeout)
        return conn

    # ------------------------------------------------------------ errors
    def _status_failure(self, raw):
        data = raw.read(ERROR_BODY_LIMIT)
        try:
            body = json.loads(data) if data else None
        except ValueError:
            body = data.decode("utf-8", "replace").strip() or None
        status = raw.status
        reason = f"HTTP {status} {raw.reason}".strip()
        error = self.status_error(status, body, reason)
        should = (raw.getheader("x-should-retry") or "").lower()
        allowed = {"true": True, "false": False}.get(should, status in RETRY_STATUSES)
        return _Retryable(error, reason, retry_after(raw), allowed)

    def status_error(self, status, body, fallback):
        """The typed error for an error status (200: an error event inside the stream)."""
        message = server_message(body, fallback)
        code = error_code(body)
        where = "stream error" if status == 200 else f"HTTP {status}"
        if status in (401, 403):
            kind = AuthenticationFailed
            text = f"{self.label}: authentication failed (check {self.key_hint})"
            if status == 403:
                text = f"{self.label}: access denied (HTTP 403: {message}; check {self.key_hint})"
        elif is_overflow(status, body):
            kind, text = ContextOverflow, f"{self.label}: context window exceeded: {message}"
        elif status in RATE_STATUSES or code in ("rate_limit_error", "overloaded_error"):
            kind, text = RateLimited, f"{self.label}: {where}: {message}"
        else:
            kind, text = ProviderHTTPError, f"{self.label}: {where}: {message}"
        return kind(scrub(text, self.secret), status, code)

    def _transport_error(self, url, exc, via=""):
        return ConnectionFailed(scrub(f"{self.label}: cannot reach {url}{via}: {reason(exc)}",
                                      self.secret))

    def lost(self, url, exc):
        """The error for a connection that broke after the response started."""
        return ConnectionFailed(scrub(f"{self.label}: lost the connection to {url}: "
                                      f"{reason(exc)}", self.secret))


class _Retryable(Exception):
    def __init__(self, error, reason, delay=None, allowed=None):
        super().__init__(reason)
        self.error, self.reason, self.delay, self.allowed = error, reason, delay, allowed
