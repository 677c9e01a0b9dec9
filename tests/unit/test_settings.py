"""``Settings`` is built whole (``term2acp/settings.py``): every attribute declared, so a
misspelt name fails where it is set, and every key of the config file's schema lands on a
declared attribute."""

import pytest

from term2acp.config import SCHEMA
from term2acp.settings import Settings


def _sections(settings):
    return [(name, getattr(settings, name)) for name in type(settings).__slots__
            if type(getattr(settings, name)).__name__.endswith("Settings")]


def test_a_misspelt_settings_attribute_fails_where_it_is_set():
    settings = Settings()
    with pytest.raises(AttributeError):
        settings.max_turns = 3  # max_turn_requests
    for name, section in _sections(settings):
        with pytest.raises(AttributeError):
            section.timeout_s = 1.0
    assert {name for name, _ in _sections(settings)} >= {"shell", "sandbox", "mcp", "lsp"}


def test_every_config_key_is_a_declared_settings_attribute():
    settings = Settings()
    declared = set(type(settings).__slots__)
    assert set(SCHEMA.fields) <= declared, set(SCHEMA.fields) - declared
    sections = dict(_sections(settings))
    for name, field in SCHEMA.fields.items():
        nested = getattr(field, "nested", None)
        if nested is not None and name in sections:
            keys = set(nested().fields if isinstance(nested, type) else nested.fields)
            assert keys <= set(type(sections[name]).__slots__), (name, keys)
