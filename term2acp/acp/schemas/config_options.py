"""session/set_config_option and v1 session/set_mode: a session's config options."""

from marshmallow import fields, validate

from term2acp.acp.schemas.base import SessionIdField, WireSchema

_ID = dict(required=True, validate=validate.Length(min=1, max=256))


class SetConfigOptionRequestSchema(WireSchema):
    session_id = SessionIdField()
    config_id = fields.String(**_ID)
    value = fields.Raw(required=True)
    type = fields.String(load_default=None, allow_none=True)


class SetModeRequestSchema(WireSchema):
    session_id = SessionIdField()
    mode_id = fields.String(**_ID)
