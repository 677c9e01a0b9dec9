"""Fixtures shared by the tool tests: a workspace root and a tool context inside it."""

import pytest

from tests.support.toolctx import tool_context, workspace


@pytest.fixture
def root(tmp_path):
    return workspace(tmp_path)


@pytest.fixture
def ctx(root, tmp_path):
    return tool_context(root, tmp_path)
