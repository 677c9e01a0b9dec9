"""Ids the runtime makes up for messages, tool calls and thoughts."""

import uuid


def new_id(prefix):
    """``<prefix>_<16 hex digits>``: unique within a session, stable once journaled."""
    return f"{prefix}_{uuid.uuid4().hex[:16]}"
