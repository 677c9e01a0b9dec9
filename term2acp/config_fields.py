"""The config file's field makers: a value of exactly one TOML type, refused with a message
that says what was expected and what was found (``config.py`` builds its schema of them)."""

import json

from marshmallow import ValidationError, fields, validate


class Typed(fields.Field):
    """A value of exactly one TOML type: no strings read as numbers, no ``true`` as 1."""

    def __init__(self, types, expected, convert=None, **kwargs):
        super().__init__(**kwargs)
        self.types, self.expected, self.convert = types, expected, convert

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, bool) and bool not in self.types or not isinstance(value, self.types):
            raise ValidationError(f"must be {self.expected}, not {toml_type(value)}")
        return self.convert(value) if self.convert else value


def text(choices=None):
    if choices is None:
        return Typed((str,), "a string")
    return Typed((str,), "a string", validate=validate.OneOf(
        choices, error='"{input}" is not allowed; use one of: ' + ", ".join(choices)))


def switch():
    return Typed((bool,), "true or false")


def count(minimum=1):
    return Typed((int,), "a whole number", validate=validate.Range(
        min=minimum, error=f"must be at least {minimum}"))


def usd(**kwargs):
    return Typed((int, float), "a number", convert=float,
                 validate=validate.Range(min=0, error="must be at least 0"), **kwargs)


def seconds(minimum=0, positive=True):
    """A duration in seconds (an integer or a decimal), loaded as a float."""
    bound = validate.Range(min=minimum, min_inclusive=not positive,
                           error=f"must be {'more than' if positive else 'at least'} {minimum}")
    return Typed((int, float), "a number of seconds", convert=float, validate=bound)


def mebibytes():
    return Typed((int, float), "a number of MiB", convert=float, validate=validate.Range(
        min=0, min_inclusive=False, error="must be more than 0"))


def toml_type(value):
    kinds = ((bool, "true or false"), (int, "a whole number"), (float, "a decimal number"),
             (str, "a string"), (list, "a list"), (dict, "a table"))
    kind = next((label for cls, label in kinds if isinstance(value, cls)), "a date or time")
    if isinstance(value, bool):
        return kind
    return f"{kind} ({json.dumps(value)})" if isinstance(value, (int, float, str)) else kind
