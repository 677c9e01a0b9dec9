"""Sign-in requests: v1 authenticate / logout, v2 auth/login / auth/logout."""

from marshmallow import fields, validate

from term2acp.acp.schemas.base import WireSchema


class LoginRequestSchema(WireSchema):
    method_id = fields.String(required=True, validate=validate.Length(min=1, max=256))


class LogoutRequestSchema(WireSchema):
    pass
