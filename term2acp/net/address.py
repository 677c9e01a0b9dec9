"""Where a request goes: base URL, name lookup, proxy choice, TLS context (standard library).

* :class:`Target`: scheme, host, port and path prefix of a base URL;
* :func:`proxy_for`: ``HTTPS_PROXY``/``HTTP_PROXY``/``ALL_PROXY`` (either case, an
  ``http://[user:pass@]host:port`` proxy reached with ``CONNECT``), ``NO_PROXY`` (host
  suffixes, IPs, CIDRs, ``*``, optional ``:port``); loopback hosts never use a proxy: a
  proxy cannot reach the user's own loopback server;
* :func:`lookup`: a host's addresses (literals without a lookup), for callers that judge
  an address before connecting to it (``web_fetch``);
* :func:`ssl_context`: verification against the system CAs, or ``SSL_CERT_FILE`` /
  ``REQUESTS_CA_BUNDLE`` (a bundle that replaces them, as in requests) / ``SSL_CERT_DIR``.
"""

import base64
import ipaddress
import os
import socket
import ssl
from urllib.parse import unquote, urlsplit

from term2acp.net.errors import BadURL

_ssl_contexts = {}  # (cafile, capath) -> ssl.SSLContext


def is_loopback(host):
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Target:
    """Where requests go: scheme, host, port and path prefix of a base URL."""

    def __init__(self, base_url):
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise BadURL(f"base URL {base_url!r} is not an http(s) URL")
        self.scheme, self.host = parts.scheme, parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        self.query = f"?{parts.query}" if parts.query else ""
        netloc = f"[{self.host}]" if ":" in self.host else self.host
        self.netloc = netloc if parts.port is None else f"{netloc}:{self.port}"

    def path(self, suffix):
        return self.prefix + suffix + self.query

    def url(self, suffix):
        return f"{self.scheme}://{self.netloc}{self.prefix}{suffix}"


def request_target(url):
    """The path and query of ``url`` as a request line carries them (``/`` at least)."""
    parts = urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def proxy_for(target, env=None):
    """``(host, port, headers)`` of the proxy to tunnel through, or None."""
    env = os.environ if env is None else env
    if is_loopback(target.host) or _no_proxy(target, _env(env, "no_proxy")):
        return None
    url = _env(env, f"{target.scheme}_proxy") or _env(env, "all_proxy")
    if not url:
        return None
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.scheme != "http" or not parts.hostname:
        raise BadURL(f"unsupported proxy URL {parts.scheme}://{parts.hostname}: only "
                     "http:// proxies (CONNECT) are supported")
    headers = {}
    if parts.username:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        headers["Proxy-Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    return parts.hostname, parts.port or 80, headers


def _env(env, name):
    return env.get(name) or env.get(name.upper()) or ""


def _no_proxy(target, value):
    for entry in (e.strip().lower() for e in value.split(",")):
        if not entry:
            continue
        if entry == "*":
            return True
        host, _, port = entry.rpartition(":") if entry.count(":") == 1 else (entry, "", "")
        if port and port != str(target.port):
            continue
        host = host.lstrip(".").strip("[]")
        name = target.host.lower()
        if name == host or name.endswith("." + host):
            return True
        try:
            if ipaddress.ip_address(name) in ipaddress.ip_network(host, strict=False):
                return True
        except ValueError:
            pass
    return False


def lookup(host, port):
    """The distinct addresses of ``host`` (``ipaddress`` objects, in the resolver's order);
    a literal is its own. Raises ``OSError`` (or ``UnicodeError`` for a bad name)."""
    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos))


def ssl_context():
    """The verifying client context, built once per CA setting (loading CAs takes a while)."""
    cafile = os.environ.get("SSL_CERT_FILE") or os.environ.get("REQUESTS_CA_BUNDLE") or None
    capath = os.environ.get("SSL_CERT_DIR") or None
    key = (cafile, capath)
    context = _ssl_contexts.get(key)
    if context is None:
        # With neither set, this loads the system store; with one set, only that bundle
        # (as requests does with REQUESTS_CA_BUNDLE).
        context = _ssl_contexts[key] = ssl.create_default_context(cafile=cafile, capath=capath)
    return context
