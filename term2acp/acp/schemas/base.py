"""The base schema: camelCase on the wire, snake_case in Python, unknown keys dropped."""

from marshmallow import EXCLUDE, Schema, ValidationError, fields, post_dump, validate

from term2acp.rpc.errors import InvalidParamsError


def camelcase(name):
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


class WireSchema(Schema):
    class Meta:
        unknown = EXCLUDE

    meta = fields.Dict(data_key="_meta", load_default=None, allow_none=True)

    def on_bind_field(self, field_name, field_obj):
        if field_obj.data_key is None:
            field_obj.data_key = camelcase(field_name)

    @post_dump
    def _drop_none(self, data, **kwargs):
        return {k: v for k, v in data.items() if v is not None}


class SessionIdField(fields.String):
    """A session id: 1-256 characters of valid Unicode. A lone surrogate (``"\\ud800"`` is
    valid JSON) can name no session (ids are UTF-8 in the store), so it is -32602 here, not
    an encoding failure deep in the store."""

    def __init__(self, **kwargs):
        kwargs.setdefault("required", True)
        super().__init__(validate=validate.Length(min=1, max=256), **kwargs)

    def _deserialize(self, value, attr, data, **kwargs):
        text = super()._deserialize(value, attr, data, **kwargs)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ValidationError("must be valid Unicode (it holds a lone surrogate), so it "
                                  "names no session") from None
        return text


class PathField(fields.String):
    """A string with no NUL characters (absolute-ness is checked by the handler)."""

    def _deserialize(self, value, attr, data, **kwargs):
        text = super()._deserialize(value, attr, data, **kwargs)
        if "\x00" in text:
            raise ValidationError("must not contain NUL characters")
        return text


class TaggedUnion(fields.Field):
    """A tagged union validated by the schema for its tag; loads to the raw dict.

    Known tags must match their schema; ``_``-prefixed (custom) and unknown tags are kept
    as they are, because every ACP union is open. The loaded value is the wire dict
    itself: content blocks flow on to the replay journal and the model unchanged.
    """

    def __init__(self, tag, schemas, **kwargs):
        super().__init__(**kwargs)
        self.tag = tag
        self.schemas = schemas

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, dict):
            raise ValidationError("must be an object")
        tag = value.get(self.tag)
        if not isinstance(tag, str):
            raise ValidationError(f'"{self.tag}" must be a string')
        schema = self.schemas.get(tag)
        if schema is not None:
            errors = schema.validate(value)
            if errors:
                raise ValidationError(errors)
        return value


def load(schema, params):
    """Load params at the edge; a failure is -32602 with the field messages in ``data``."""
    try:
        return schema.load(params)
    except ValidationError as exc:
        messages = exc.normalized_messages()
        raise InvalidParamsError(f"Invalid params: {summarize(messages)}",
                                 data={"errors": messages}) from None


def summarize(messages, prefix=""):
    parts = []
    if isinstance(messages, dict):
        for key, value in messages.items():
            parts.append(summarize(value, f"{prefix}{key}." if not isinstance(value, list) else f"{prefix}{key}"))
    elif isinstance(messages, list):
        text = " ".join(str(m) for m in messages if not isinstance(m, (dict, list)))
        nested = [summarize(m, prefix) for m in messages if isinstance(m, (dict, list))]
        if text:
            parts.append(f"{prefix}: {text}" if prefix else text)
        parts.extend(nested)
    else:
        parts.append(f"{prefix.rstrip('.')}: {messages}")
    return "; ".join(p for p in parts if p)
