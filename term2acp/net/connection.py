"""The one HTTP connection factory, and what a failure of one means.

:func:`connection` gives an ``http.client`` connection (cooperative under gevent's monkey
patch) to a :class:`~term2acp.net.address.Target`: through the proxy
:func:`~term2acp.net.address.proxy_for` chooses (a ``CONNECT`` tunnel, for both schemes)
or straight to the host, or to an address the caller checked before (``address``: then
the name is not looked up again); TLS verifies against :func:`ssl_context`. It does not
connect: the first request does, or the caller's ``connect()`` when it wants connection
failures apart from the rest.

:func:`open_socket` connects without a name lookup when the host is an IP literal or
``localhost`` (the first lookup through gevent's resolver starts its thread pool, a delay
on the first prompt of a local-server user).

:func:`reason` and :func:`transient` describe a failure (``FAILURES``) for a message and
for the retry rule; :func:`backoff` and :func:`retry_after` are the retry delays
(exponential with jitter, 0.5 s doubling to 8 s; the server's ``retry-after-ms`` /
``Retry-After`` when it is at most 60 s).
"""

import http.client
import ipaddress
import random
import socket
import time
from email.utils import parsedate_to_datetime

from term2acp.net.address import proxy_for, ssl_context

FAILURES = (OSError, http.client.HTTPException)  # a socket's or HTTP's own failure
# a kept-alive connection the server had closed: the request can go again on a new one
STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError,
         ConnectionAbortedError)
BACKOFF_FIRST, BACKOFF_CAP, RETRY_AFTER_CAP = 0.5, 8.0, 60.0


def connection(target, timeout, address=None):
    """``(conn, proxy)``: an unconnected connection to ``target`` with ``timeout`` for
    every socket wait, and the ``(host, port, headers)`` of the proxy it tunnels through
    (None: direct). ``address`` (an IP string) pins a direct connection to that address.
    Raises :class:`~term2acp.net.errors.BadURL` for a proxy setting we cannot use."""
    proxy = proxy_for(target)
    host, port = (proxy[0], proxy[1]) if proxy else (target.host, target.port)
    if target.scheme == "https":
        conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=ssl_context())
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
    if proxy:
        conn.set_tunnel(target.host, target.port, headers=proxy[2])
    if proxy or address is None:
        conn._create_connection = open_socket  # http.client's per-connection hook
    else:
        conn._create_connection = lambda _addr, wait, source=None: open_socket(
            (address, port), wait, source)
    return conn, proxy


def no_delay(conn):
    """Send small writes at once: a request goes out as two writes (head, body), and with
    Nagle the body waits for the server's delayed ACK of the head, 40 ms on Linux."""
    conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def open_socket(address, timeout, source_address=None):
    """``socket.create_connection`` (cooperative under the patch), minus the lookup for
    literal addresses; ``localhost`` tries 127.0.0.1, then ::1."""
    host, port = address
    if host == "localhost":
        candidates = ("127.0.0.1", "::1")
    else:
        try:
            candidates = (str(ipaddress.ip_address(host.strip("[]"))),)
        except ValueError:
            return socket.create_connection(address, timeout, source_address)
    for number, ip in enumerate(candidates):
        sock = socket.socket(socket.AF_INET6 if ":" in ip else socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            if source_address:
                sock.bind(source_address)
            sock.connect((ip, port))
            return sock
        except BaseException as exc:
            sock.close()
            if number + 1 == len(candidates) or not isinstance(exc, OSError):
                raise
    raise OSError("no address to connect to")  # not reached


# ---------------------------------------------------------------- failures
def reason(exc):
    """A failure in a few words for a message (a TLS verification failure says what to set)."""
    if isinstance(exc, socket.timeout):
        return "timed out"
    if isinstance(exc, http.client.IncompleteRead):
        return "the response ended early"
    verify = getattr(exc, "verify_message", None)
    if verify:
        return (f"TLS certificate verification failed ({verify}); set SSL_CERT_FILE to the "
                "CA bundle that signs this server")
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return text[:200]


def transient(exc):
    """False for failures a retry cannot fix (TLS verification, proxy refusals, DNS)."""
    if getattr(exc, "verify_message", None) or type(exc).__module__ == "ssl":
        return False
    if isinstance(exc, socket.gaierror):
        return False
    return not str(exc).startswith("Tunnel connection failed: 4")


def backoff(attempt):
    return min(BACKOFF_CAP, BACKOFF_FIRST * 2 ** (attempt - 1)) * (1 - 0.25 * random.random())


def retry_after(response):
    """The server's requested delay in seconds, when it is sane (0..60 s)."""
    value = None
    millis = response.getheader("retry-after-ms")
    seconds = response.getheader("retry-after")
    try:
        if millis is not None:
            value = float(millis) / 1000
        elif seconds is not None:
            value = float(seconds)
    except ValueError:
        value = _http_date_delay(seconds)
    return value if value is not None and 0 <= value <= RETRY_AFTER_CAP else None


def _http_date_delay(text):
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return when.timestamp() - time.time()
