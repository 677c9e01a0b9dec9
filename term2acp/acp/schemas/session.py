"""session/new, list, resume, prompt, cancel, close, fork, delete."""

from marshmallow import ValidationError, fields

from term2acp.acp.schemas.base import PathField, SessionIdField, WireSchema
from term2acp.acp.schemas.content import ContentBlock
from term2acp.core.workspace import WorkspaceError, validate_extra_root
from term2acp.mcp.config import parse_servers
from term2acp.rpc.errors import InvalidParamsError


class McpServersField(fields.Raw):
    """``mcpServers`` -> ``mcp.config.ServerConfig`` list; a malformed entry is -32602 naming
    it. v2: absolute ``command``, stdio and http; v1 passes ``absolute_command=False`` (bare
    names are resolved on PATH) and also accepts sse."""

    def __init__(self, absolute_command=True, transports=("stdio", "http"), **kwargs):
        super().__init__(**kwargs)
        self.absolute_command = absolute_command
        self.transports = transports

    def _deserialize(self, value, attr, data, **kwargs):
        try:
            return parse_servers(value, self.absolute_command, self.transports)
        except ValueError as exc:
            raise InvalidParamsError(f"invalid MCP server: {exc}") from None


class RootsField(fields.Raw):
    """``additionalDirectories``: the complete list of the session's other roots, each
    canonical; a missing, relative or non-directory path is -32602 naming it."""

    def _deserialize(self, value, attr, data, **kwargs):
        if value is None:
            return []
        if not isinstance(value, list):
            raise InvalidParamsError("additionalDirectories must be an array of absolute paths")
        try:
            return [validate_extra_root(path) for path in value]
        except WorkspaceError as exc:
            raise InvalidParamsError(str(exc)) from None


class SessionSetup(WireSchema):
    """The session's setup lists: other roots and MCP servers."""

    additional_directories = RootsField(load_default=list, allow_none=True)
    mcp_servers = McpServersField(load_default=list, allow_none=True)


class NewSessionRequestSchema(SessionSetup):
    cwd = PathField(required=True)


class ForkSessionRequestSchema(SessionSetup):
    session_id = SessionIdField()
    cwd = PathField(required=True)


class ListSessionsRequestSchema(WireSchema):
    cwd = PathField(allow_none=True, load_default=None)
    cursor = fields.String(allow_none=True, load_default=None)


class ReplayFromField(fields.Dict):
    def _deserialize(self, value, attr, data, **kwargs):
        value = super()._deserialize(value, attr, data, **kwargs)
        if not isinstance(value.get("type"), str):
            raise ValidationError('"type" must be a string')
        return value


class ResumeSessionRequestSchema(SessionSetup):
    session_id = SessionIdField()
    cwd = PathField(required=True)
    replay_from = ReplayFromField(allow_none=True, load_default=None)


class PromptRequestSchema(WireSchema):
    session_id = SessionIdField()
    prompt = fields.List(ContentBlock(), required=True)


class SessionIdSchema(WireSchema):
    session_id = SessionIdField()


CancelNotificationSchema = SessionIdSchema
CloseSessionRequestSchema = SessionIdSchema
DeleteSessionRequestSchema = SessionIdSchema
