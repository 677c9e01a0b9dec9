"""term2acp/acp/schemas/base.py: camelCase keys, unknown keys dropped, None left out."""

from marshmallow import fields, post_dump, post_load, pre_load, validates_schema

from term2acp.acp.schemas.base import WireSchema


class _Hooked(WireSchema):
    name = fields.String()

    @pre_load
    def b_first(self, data, **kwargs):
        return data

    @pre_load
    def a_second(self, data, **kwargs):
        return data

    @post_load
    def loaded(self, data, **kwargs):
        return data

    @validates_schema
    def check(self, data, **kwargs):
        pass


class _Overrides(_Hooked):
    b_first = None  # a plain attribute hides the inherited hook of that name

    @post_dump
    def _drop_none(self, data, **kwargs):  # replaces the base class's, same name
        return data

    @pre_load
    def z_last(self, data, **kwargs):
        return data


def test_keys_are_camel_case_and_unknown_ones_are_dropped():
    class Request(WireSchema):
        session_id = fields.String(required=True)

    assert Request().load({"sessionId": "s", "other": 1, "_meta": {"k": 1}}) == {
        "session_id": "s", "meta": {"k": 1}}
    assert Request().dump({"session_id": "s", "meta": None}) == {"sessionId": "s"}


def test_the_hooks_run():
    assert _Overrides().load({"name": "x"}) == {"name": "x", "meta": None}
    assert _Overrides().dump({"name": None}) == {"name": None}  # own _drop_none kept it
    assert _Hooked().dump({"name": None}) == {}
