"""initialize."""

from marshmallow import fields, validate

from term2acp.acp.schemas.base import WireSchema


class ImplementationSchema(WireSchema):
    name = fields.String(required=True)
    version = fields.String(required=True)
    title = fields.String(allow_none=True, load_default=None)


class InitializeRequestSchema(WireSchema):
    protocol_version = fields.Integer(required=True, strict=True,
                                      validate=validate.Range(min=0, max=65535))
    info = fields.Nested(ImplementationSchema, required=True)
    capabilities = fields.Dict(load_default=dict, allow_none=True)
