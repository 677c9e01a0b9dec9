"""Turn a plain blocking Python function into a tool.

::

    from marshmallow import Schema, fields
    from term2acp.tools.plugins import function_tool

    class WordCountParams(Schema):
        path = fields.String(required=True, metadata={"description": "File to count."})

    @function_tool(name="word_count", params=WordCountParams,
                   description="Count the words in a workspace file.", kind="read")
    def word_count(args, ctx):
        with open(os.path.join(ctx.root, args["path"])) as fh:
            return f"{len(fh.read().split())} words"

The decorated name is a :class:`~term2acp.tools.base.Tool` instance; point an entry
point in the ``term2acp.tools`` group at it (see ``registry.load_tools``). The function
runs in the call's greenlet, so plain blocking I/O is fine. It returns a string, a
:class:`ToolResult`, None, or anything JSON-serialisable; any exception it raises becomes
a failed tool call whose message the model sees. ``approval`` is ``"never"``,
``"always"`` (an ordinary Allow/Reject question before each call) or a callable
``(args, ctx) -> ApprovalRequest | None``; the function may also ask mid-run with
``ctx.approve(ApprovalRequest(...))``, which returns True only on an allow. A denial that
must end the turn (the session was cancelled or closed meanwhile) is raised from
``ctx.approve`` as ``core.cancel.TurnAborted``, a ``GreenletExit``: ``except Exception``
does not catch it, so the function cannot carry on past it.
"""

import json
import logging
import re

from marshmallow import Schema

from term2acp.core.approvals import ORDINARY, ApprovalRequest
from term2acp.tools.base import Tool, ToolError, ToolResult

log = logging.getLogger(__name__)

TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}\Z")  # what model APIs accept as a function name
KINDS = ("read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other")


class FunctionTool(Tool):
    """A tool backed by ``func(args, ctx)``; built by :func:`function_tool`."""

    def __init__(self, func, name, params, description, kind="other", approval="never",
                 title=None):
        if not TOOL_NAME.match(name or ""):
            raise ValueError(f"tool name {name!r} must match {TOOL_NAME.pattern}")
        if kind not in KINDS:
            raise ValueError(f"tool kind {kind!r} must be one of {', '.join(KINDS)}")
        if approval not in ("never", "always") and not callable(approval):
            raise ValueError('approval must be "never", "always" or a callable (args, ctx)')
        if params is not None and not (isinstance(params, type) and issubclass(params, Schema)):
            raise ValueError("params must be a marshmallow Schema subclass")
        self.func = func
        self.name = name
        self.Params = params or Schema
        self.description = description or (func.__doc__ or "").strip() or name
        self.kind = kind
        self._approval = approval
        self._title = title
        self.__doc__ = func.__doc__

    def title(self, args):
        if callable(self._title):
            return self._title(args)
        return self._title or self.name

    def approval(self, args, ctx):
        if self._approval == "never":
            return None
        if self._approval == "always":
            return ApprovalRequest(variant=ORDINARY, title=self.title(args))
        try:
            return self._approval(args, ctx)
        except Exception:  # fail closed: a broken policy asks rather than allows
            log.warning("approval policy of tool %s failed; asking the user", self.name,
                        exc_info=True)
            return ApprovalRequest(variant=ORDINARY, title=self.title(args))

    def run(self, args, ctx):
        try:
            result = self.func(args, ctx)
        except ToolError:
            raise
        except Exception as exc:
            log.info("tool %s raised", self.name, exc_info=True)
            raise ToolError(f"{self.name} failed: {exc or type(exc).__name__}") from None
        return as_result(result)

    def __repr__(self):
        return f"<FunctionTool {self.name} -> {getattr(self.func, '__qualname__', self.func)}>"


def as_result(value):
    """Normalise what a function returned into a :class:`ToolResult`."""
    if isinstance(value, ToolResult):
        return value
    if value is None:
        return ToolResult("(no output)")
    if isinstance(value, str):
        return ToolResult(value)
    try:
        return ToolResult(json.dumps(value, ensure_ascii=False, default=str), raw_output=value)
    except (TypeError, ValueError):
        return ToolResult(str(value))


def function_tool(name, params=None, description="", kind="other", approval="never",
                  title=None):
    """Decorator: ``@function_tool(name=..., params=Schema, ...)`` over ``func(args, ctx)``."""

    def wrap(func):
        return FunctionTool(func, name, params, description, kind, approval, title)

    return wrap
