"""Fixtures shared by the tool tests: a workspace root and a tool context inside it."""

import pytest

from tests.support.toolctx import tool_context, workspace


@pytest.fixture
def root(tmp_path):
    return workspace(tmp_path)


@pytest.fixture
def ctx(root, tmp_path):
    return tool_context(root, tmp_path)


@pytest.fixture(autouse=True)
def walker_only(monkeypatch):
    """The tool tests pin the walker's rules, whatever the machine's load does to its head
    start; test_ripgrep.py turns ripgrep back on and checks it answers the same."""
    from term2acp.tools import ripgrep

    real = ripgrep.usable
    monkeypatch.setattr(ripgrep, "usable", lambda *args: False)
    return real
