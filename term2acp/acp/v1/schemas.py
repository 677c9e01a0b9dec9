"""marshmallow schemas for the requests only v1 has, or has in another shape.

``session/prompt``, ``session/list``, ``session/cancel`` and ``session/close`` have the
same shape in both versions and reuse ``acp/schemas/session.py``.
"""

from term2acp.acp.schemas.base import PathField, SessionIdField, WireSchema
from term2acp.acp.schemas.session import McpServersField as _McpServersField
from term2acp.acp.schemas.session import RootsField


def McpServersField(**kwargs):  # noqa: N802 - v1's mcpServers: bare commands, sse too
    return _McpServersField(absolute_command=False, transports=("stdio", "http", "sse"),
                            allow_none=True, **kwargs)


class _SessionSetup(WireSchema):
    """MCP servers are connected (``mcp/``); other roots as in v2."""

    mcp_servers = McpServersField(load_default=list)
    additional_directories = RootsField(load_default=list, allow_none=True)


class NewSessionRequestSchema(_SessionSetup):
    cwd = PathField(required=True)


class LoadSessionRequestSchema(_SessionSetup):
    session_id = SessionIdField()
    cwd = PathField(required=True)


class ResumeSessionRequestSchema(_SessionSetup):
    session_id = SessionIdField()
    cwd = PathField(required=True)


ForkSessionRequestSchema = ResumeSessionRequestSchema  # sessionId, cwd, mcpServers
