"""The network layer's failures; each message is safe to show (no credential in it).

Callers turn them into their own vocabulary (a provider error, a failed tool call, a
stopped MCP server); a failure of the socket or of HTTP itself stays an ``OSError`` or
``http.client.HTTPException`` (:data:`term2acp.net.connection.FAILURES`), described by
:func:`term2acp.net.connection.reason`.
"""


class NetError(Exception):
    """A request that cannot be made as configured."""


class BadURL(NetError):
    """A URL (a server's or a proxy's) that is not one we can send a request to."""


class EventTooLarge(ValueError):
    """One server-sent event (or one line of it) exceeds the decoder's bound."""

    def __init__(self, message, limit):
        super().__init__(message)
        self.limit = limit
