"""session/list's cursors (opaque to the client: only the ones we minted decode) and the
listed sessions' ``mcp_servers`` column read back."""

import base64
import binascii
import json

from term2acp.sessions.errors import InvalidCursor


def encode_cursor(updated_at, session_id):
    raw = json.dumps([updated_at, session_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor):
    """Returns ``(updated_at, id)``; raises InvalidCursor for anything we did not mint."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        updated_at, session_id = json.loads(raw)
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
        raise InvalidCursor(cursor) from None
    if not isinstance(updated_at, str) or not isinstance(session_id, str):
        raise InvalidCursor(cursor)
    return updated_at, session_id


def servers_of(column):
    """The ``mcp_servers`` column -> a list of dicts (empty for NULL or anything unreadable)."""
    if not column:
        return []
    try:
        value = json.loads(column)
    except ValueError:
        return []
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []
