"""The client's answer to session/request_permission."""

from marshmallow import fields

from term2acp.acp.schemas.base import WireSchema


class OutcomeSchema(WireSchema):
    outcome = fields.String(required=True)
    option_id = fields.String(load_default=None, allow_none=True)


class RequestPermissionResponseSchema(WireSchema):
    outcome = fields.Nested(OutcomeSchema, required=True)
