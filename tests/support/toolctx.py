"""One way to build what a tool runs with in the tool tests: a workspace root and a context."""

import os

from term2acp.core.access import AccessState
from term2acp.settings import Settings
from term2acp.tools.base import ToolContext


def workspace(tmp_path):
    """A fresh canonical workspace root, ``tmp_path/work``."""
    (tmp_path / "work").mkdir()
    return os.path.realpath(tmp_path / "work")


def tool_context(root, tmp_path):
    """A :class:`ToolContext` on ``root`` with nothing granted and settings isolated under
    ``tmp_path`` (no user config file is read)."""
    env = {"TERM2ACP_HOME": str(tmp_path / "home"), "TERM2ACP_CONFIG": str(tmp_path / "none.toml")}
    return ToolContext(root=root, session_id="s", call_id="c", access=AccessState(root),
                       settings=Settings.load(env=env), emit=[].append)
