"""initialize, in the shape of the version the request names."""

from marshmallow import fields, validate

from term2acp.acp.schemas.base import WireSchema


class ImplementationSchema(WireSchema):
    name = fields.String(required=True)
    version = fields.String(required=True)
    title = fields.String(allow_none=True, load_default=None)


class InitializeRequestSchema(WireSchema):
    """v2: ``info`` is required, capabilities are ``capabilities``."""

    protocol_version = fields.Integer(required=True, strict=True,
                                      validate=validate.Range(min=0, max=65535))
    info = fields.Nested(ImplementationSchema, required=True)
    capabilities = fields.Dict(load_default=dict, allow_none=True)


class LenientDict(fields.Raw):
    """v1 marks these fields default-on-error: anything but an object counts as absent."""

    def _deserialize(self, value, attr, data, **kwargs):
        return value if isinstance(value, dict) else None


class InitializeV1RequestSchema(WireSchema):
    """v1: ``clientInfo`` and ``clientCapabilities``, both optional."""

    protocol_version = fields.Integer(required=True, strict=True,
                                      validate=validate.Range(min=0, max=65535))
    client_info = LenientDict(load_default=None, allow_none=True)
    client_capabilities = LenientDict(load_default=None, allow_none=True)
