"""The tool set of a session: built-ins plus plug-ins from the ``term2acp.tools`` group.

A plug-in package declares, e.g. in its ``pyproject.toml``::

    [project.entry-points."term2acp.tools"]
    word_count = "my_package.tools:word_count"

The entry point may name a :class:`Tool` instance (such as one made with
``plugins.function_tool``) or a :class:`Tool` subclass taking no arguments. A plug-in
that fails to import or is not a valid tool is logged and skipped, never fatal, and a
plug-in cannot take a name that is already registered (built-ins win).
"""

import importlib.metadata
import logging

from term2acp.tools.apply_patch import ApplyPatchTool
from term2acp.tools.ask_user import AskUserTool
from term2acp.tools.base import Tool
from term2acp.tools.code import CodeTool
from term2acp.tools.edit import CreateFileTool, EditFileTool
from term2acp.tools.files import ListDirectoryTool, ReadFileTool
from term2acp.tools.plan import FinishPlanTool, UpdatePlanTool
from term2acp.tools.plugins import KINDS, TOOL_NAME
from term2acp.tools.processes import ShellKillTool, ShellOutputTool
from term2acp.tools.run_code import RunCodeTool
from term2acp.tools.search import GlobTool, GrepTool
from term2acp.tools.shell import ShellTool
from term2acp.tools.web_fetch import WebFetchTool

log = logging.getLogger(__name__)

GROUP = "term2acp.tools"


def builtin_tools():
    """Fresh instances of every built-in tool."""
    return [ReadFileTool(), ListDirectoryTool(), GlobTool(), GrepTool(), CreateFileTool(),
            EditFileTool(), ApplyPatchTool(), CodeTool(), WebFetchTool(), UpdatePlanTool(),
            FinishPlanTool(), AskUserTool(), ShellTool(), ShellOutputTool(), ShellKillTool(),
            RunCodeTool()]


def load_tools(settings=None):
    """``name -> Tool`` for a session: built-ins first, then plug-ins sorted by entry point.

    ``settings`` is accepted for plug-in configuration to come; nothing reads it yet.
    """
    tools = {tool.name: tool for tool in builtin_tools()}
    for entry_point in _entry_points():
        tool = _load_plugin(entry_point)
        if tool is None:
            continue
        if tool.name in tools:
            log.warning("plug-in %s (%s) skipped: the tool name %r is already taken",
                        entry_point.name, entry_point.value, tool.name)
            continue
        tools[tool.name] = tool
        log.info("loaded tool plug-in %s from %s", tool.name, entry_point.value)
    return tools


def _entry_points():
    try:
        found = importlib.metadata.entry_points(group=GROUP)
    except Exception:  # broken metadata of some installed distribution
        log.warning("cannot read %s entry points; no plug-ins loaded", GROUP, exc_info=True)
        return []
    return sorted(found, key=lambda ep: (ep.name, ep.value))


def _load_plugin(entry_point):
    """The Tool an entry point names, or None (logged) when it is broken."""
    try:
        target = entry_point.load()
        tool = target() if isinstance(target, type) and issubclass(target, Tool) else target
        problem = _problem(tool)
    except Exception as exc:  # a plug-in must never take the agent down
        log.warning("plug-in %s (%s) skipped: %s: %s", entry_point.name, entry_point.value,
                    type(exc).__name__, exc, exc_info=log.isEnabledFor(logging.DEBUG))
        return None
    if problem:
        log.warning("plug-in %s (%s) skipped: %s", entry_point.name, entry_point.value, problem)
        return None
    return tool


def _problem(tool):
    """Why ``tool`` cannot be offered to the model, or None."""
    if not isinstance(tool, Tool):
        return f"{tool!r} is not a Tool instance or subclass"
    if not isinstance(tool.name, str) or not TOOL_NAME.match(tool.name):
        return f"tool name {tool.name!r} must match {TOOL_NAME.pattern}"
    if tool.kind not in KINDS:
        return f"tool kind {tool.kind!r} is not an ACP tool kind"
    if not tool.description:
        return "the tool has no description"
    if type(tool).run is Tool.run:
        return "the tool does not implement run()"
    tool.spec()  # the Params schema must convert to a JSON schema
    return None
