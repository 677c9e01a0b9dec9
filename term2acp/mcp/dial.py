"""One HTTP connection for the MCP transports and sign-in, made by the one network path
(``term2acp/net/``): the proxy, the CAs and the loopback rule of the providers and
``web_fetch``."""

from term2acp.mcp.rpc import ServerGone
from term2acp.net.address import Target, request_target
from term2acp.net.connection import connection
from term2acp.net.errors import NetError


def dial(url, timeout):
    """``(conn, request target)``: an unconnected connection to ``url``'s host, through the
    proxy and with the CAs the providers use (HTTPS_PROXY, NO_PROXY, SSL_CERT_FILE, ...;
    loopback is direct); a proxy setting that cannot be used stops the server."""
    try:
        conn, _proxy = connection(Target(url), timeout)
    except NetError as exc:
        raise ServerGone(str(exc)) from None
    return conn, request_target(url)
