"""session/new, list, resume, prompt, cancel, close."""

from marshmallow import ValidationError, fields, pre_load, validate

from term2acp.acp.schemas.base import PathField, WireSchema
from term2acp.acp.schemas.content import ContentBlock
from term2acp.rpc.errors import InvalidParamsError


class _UnsupportedListsFirst(WireSchema):
    """Non-empty ``additionalDirectories`` / ``mcpServers`` are refused before anything else."""

    additional_directories = fields.List(fields.Raw(), load_default=list, allow_none=True)
    mcp_servers = fields.List(fields.Raw(), load_default=list, allow_none=True)

    @pre_load
    def _refuse_unsupported(self, data, **kwargs):
        if isinstance(data, dict):
            if data.get("additionalDirectories"):
                raise InvalidParamsError("additionalDirectories are not supported")
            if data.get("mcpServers"):
                raise InvalidParamsError("MCP servers are not supported")
        return data


class NewSessionRequestSchema(_UnsupportedListsFirst):
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


class ResumeSessionRequestSchema(_UnsupportedListsFirst):
    session_id = fields.String(required=True, validate=validate.Length(min=1, max=256))
    cwd = PathField(required=True)
    replay_from = ReplayFromField(allow_none=True, load_default=None)


class PromptRequestSchema(WireSchema):
    session_id = fields.String(required=True, validate=validate.Length(min=1, max=256))
    prompt = fields.List(ContentBlock(), required=True)


class SessionIdSchema(WireSchema):
    session_id = fields.String(required=True, validate=validate.Length(min=1, max=256))


CancelNotificationSchema = SessionIdSchema
CloseSessionRequestSchema = SessionIdSchema
