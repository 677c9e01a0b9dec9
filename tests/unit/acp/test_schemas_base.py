"""term2acp/acp/schemas/base.py: the wire schemas' metaclass finds marshmallow's hooks."""

import importlib

import pytest
from marshmallow import fields, post_dump, post_load, pre_load, validates_schema
from marshmallow.schema import SchemaMeta

from term2acp.acp.schemas.base import WireSchema, WireSchemaMeta

MODULES = ("term2acp.acp.schemas.initialize", "term2acp.acp.schemas.session",
           "term2acp.acp.schemas.content", "term2acp.acp.schemas.controls",
           "term2acp.acp.schemas.permission", "term2acp.acp.v1.schemas")


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


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


def _found(hooks):
    return {tag: entries for tag, entries in hooks.items() if entries}


def test_every_wire_schema_gets_marshmallow_s_own_hooks():
    for name in MODULES:
        importlib.import_module(name)
    classes = list(_subclasses(WireSchema)) + [WireSchema]
    assert len(classes) > 25
    for cls in classes:
        assert type(cls) is WireSchemaMeta
        # (marshmallow's lookups add empty lists to a used class's defaultdict)
        assert _found(cls._hooks) == _found(SchemaMeta.resolve_hooks(cls)), cls.__name__


@pytest.mark.parametrize("cls", [_Hooked, _Overrides])
def test_hooks_follow_the_nearest_definition_in_name_order(cls):
    ours, theirs = cls._hooks, SchemaMeta.resolve_hooks(cls)
    assert dict(ours) == dict(theirs)
    assert ours["no_such_tag"] == []  # a defaultdict, as marshmallow's lookups expect


def test_the_hooks_run():
    assert _Overrides().load({"name": "x"}) == {"name": "x", "meta": None}
    assert _Overrides().dump({"name": None}) == {"name": None}  # own _drop_none kept it
    assert _Hooked().dump({"name": None}) == {}
