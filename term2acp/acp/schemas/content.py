"""Content blocks (prompt content) as a tagged union on ``type``."""

from marshmallow import fields

from term2acp.acp.schemas.base import TaggedUnion, WireSchema


class TextContentSchema(WireSchema):
    type = fields.String(required=True)
    text = fields.String(required=True)
    annotations = fields.Dict(allow_none=True)


class ImageContentSchema(WireSchema):
    type = fields.String(required=True)
    data = fields.String(required=True)
    mime_type = fields.String(required=True)


class AudioContentSchema(ImageContentSchema):
    pass


class ResourceLinkSchema(WireSchema):
    type = fields.String(required=True)
    name = fields.String(required=True)
    uri = fields.String(required=True)
    title = fields.String(allow_none=True)
    description = fields.String(allow_none=True)
    mime_type = fields.String(allow_none=True)
    size = fields.Integer(allow_none=True, strict=True)


class EmbeddedResourceSchema(WireSchema):
    type = fields.String(required=True)
    resource = fields.Dict(required=True)


CONTENT_BLOCK_SCHEMAS = {
    "text": TextContentSchema(),
    "image": ImageContentSchema(),
    "audio": AudioContentSchema(),
    "resource_link": ResourceLinkSchema(),
    "resource": EmbeddedResourceSchema(),
}


def ContentBlock(**kwargs):  # noqa: N802 - reads like a field class
    return TaggedUnion("type", CONTENT_BLOCK_SCHEMAS, **kwargs)
