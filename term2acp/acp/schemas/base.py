"""The base schema: camelCase on the wire, snake_case in Python, unknown keys dropped."""

from collections import defaultdict

from marshmallow import EXCLUDE, Schema, ValidationError, fields, post_dump
from marshmallow.schema import SchemaMeta

from term2acp.rpc.errors import InvalidParamsError


def camelcase(name):
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


class WireSchemaMeta(SchemaMeta):
    """marshmallow's schema metaclass, with a quicker :meth:`resolve_hooks`.

    marshmallow finds a class's processors (``@post_dump`` etc.) by looking every name of
    ``dir(cls)`` up along the MRO: ~100 us a class, and the agent defines ~25 schema
    classes before it answers ``initialize`` or a first ``session/new``. This reads each
    class's own ``__dict__`` once, in MRO order, to the same result: for each name, the
    definition nearest the class; hooks in name order (``dir``'s), one list per tag
    (``tests/unit/acp/test_schemas_base.py`` compares the two on every wire schema).
    """

    def resolve_hooks(cls):
        nearest = {}
        for klass in cls.__mro__:
            for name, attr in vars(klass).items():
                if name not in nearest:
                    nearest[name] = getattr(attr, "__marshmallow_hook__", None)
        hooks = defaultdict(list)
        for name in sorted(nearest):
            config = nearest[name]
            if config:
                for tag, entries in config.items():
                    hooks[tag].extend((name, many, kwargs) for many, kwargs in entries)
        return hooks


class WireSchema(Schema, metaclass=WireSchemaMeta):
    class Meta:
        unknown = EXCLUDE

    meta = fields.Dict(data_key="_meta", load_default=None, allow_none=True)

    def on_bind_field(self, field_name, field_obj):
        if field_obj.data_key is None:
            field_obj.data_key = camelcase(field_name)

    @post_dump
    def _drop_none(self, data, **kwargs):
        return {k: v for k, v in data.items() if v is not None}


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
