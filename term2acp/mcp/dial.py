"""One HTTP connection for the MCP transports and sign-in: the providers' proxy and CAs."""

import http.client
import urllib.parse

from term2acp.mcp.rpc import ServerGone
from term2acp.providers import net
from term2acp.providers.errors import ConnectionFailed


def dial(url, timeout):
    """A connection to ``url``'s host, through the proxy and with the CAs the providers use
    (``providers/net.py``: HTTPS_PROXY, NO_PROXY, SSL_CERT_FILE, ...; loopback is direct)."""
    target = net.Target(url)
    try:
        proxy = net.proxy_for(target)
    except ConnectionFailed as exc:
        raise ServerGone(str(exc)) from None
    host, port = (proxy[0], proxy[1]) if proxy else (target.host, target.port)
    if target.scheme == "https":
        conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=net.ssl_context())
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
    conn._create_connection = net.open_socket  # http.client's per-connection hook
    if proxy:
        conn.set_tunnel(target.host, target.port, headers=proxy[2])
    parts = urllib.parse.urlsplit(url)
    return conn, (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
