"""The client's answer to ``elicitation/create`` (the same shape in v1 and v2)."""

from marshmallow import fields, validate

from term2acp.acp.schemas.base import WireSchema


class CreateElicitationResponseSchema(WireSchema):
    """``{action: "accept", content?}`` | ``{action: "decline"}`` | ``{action: "cancel"}``.
    Another (custom or future) action loads too: the caller treats it as a cancel."""

    action = fields.String(required=True, validate=validate.Length(min=1))
    content = fields.Dict(keys=fields.String(), load_default=None, allow_none=True)
