"""The ``agent`` tool: delegate a task to a sub-agent, a child session the editor watches.

``{description, prompt, kind, isolation}``: ``kind`` is one of :mod:`kinds` (``general``
by default), ``isolation`` is ``"none"`` or ``"overlay"`` (a ``general`` child works on a
copy of the workspace; its changes are one question with the diff, ``overlay.py``). The
child's final answer is the call's result; its calls are shown as the parent's, tagged
with this call's id (``child.py``). The tool is added to a session's tools by the turn's
builder (``sessions/prompts.py``), with the kinds found for the session's workspace.
"""

from marshmallow import Schema, fields, validate

from term2acp.core import trust
from term2acp.providers.errors import ProviderError
from term2acp.tools.base import Tool, ToolError
from term2acp.turns.agents import child, kinds as kinds_
from term2acp.turns.agents.overlay import Overlay

NAME = "agent"
ISOLATIONS = ("none", "overlay")


class AgentParams(Schema):
    description = fields.String(required=True, validate=validate.Length(min=1, max=200),
                                metadata={"description": "A short (3-8 words) title of the "
                                                         "task, shown to the user"})
    prompt = fields.String(required=True, validate=validate.Length(min=1),
                           metadata={"description": "The whole task for the sub-agent: it "
                                                    "sees nothing of this conversation, so "
                                                    "say what to do, where, and what to "
                                                    "report back"})
    kind = fields.String(load_default=kinds_.GENERAL,
                         metadata={"description": "The kind of sub-agent (listed in the "
                                                  "tool's description); default general"})
    isolation = fields.String(load_default="none", validate=validate.OneOf(ISOLATIONS),
                              metadata={"description": "none: the sub-agent works in the "
                                                       "workspace; overlay (general only): "
                                                       "on a copy, its changes applied "
                                                       "after the user approves the diff"})


def describe(found):
    """The tool's description: what it does, and the kinds (project files by name only:
    nothing of an untrusted file reaches the model)."""
    lines = []
    for kind in found.values():
        if kind.project:
            lines.append(f"- {kind.name}: an agent file of the project "
                         f"(the user is asked to trust it on first use)")
        else:
            lines.append(f"- {kind.name}: {kind.description}")
    return (
        "Start a sub-agent on a self-contained task and get its final answer as the result. "
        "It has its own conversation (it sees only your prompt), so it keeps file dumps and "
        "searches out of yours: use it to survey code, research a question, or make an "
        "independent change. Several agent calls in one answer run side by side. A "
        "sub-agent cannot start another one.\nKinds:\n" + "\n".join(lines))


class AgentTool(Tool):
    name = NAME
    kind = "think"  # the calls of its child are checked (and refused or asked) one by one
    Params = AgentParams

    def __init__(self, found=None):
        self.kinds = dict(found or kinds_.BUILT_IN)
        self.description = describe(self.kinds)

    def title(self, args):
        kind = args.get("kind") or kinds_.GENERAL
        label = args.get("description") or "sub-agent"
        return f"{label} ({kind})" if kind != kinds_.GENERAL else label

    def run(self, args, ctx):
        turn = ctx.agents
        if turn is None:
            raise ToolError("A sub-agent cannot start another sub-agent: do this part of "
                            "the task yourself.")
        kind = self.kinds.get(args["kind"])
        if kind is None:
            raise ToolError(f"Unknown sub-agent kind {args['kind']!r}. Kinds: "
                            f"{', '.join(self.kinds)}.")
        if args["isolation"] == "overlay" and kind.tools is not None:
            raise ToolError(f"isolation overlay is for sub-agents that may change files "
                            f"(general); {kind.name} cannot.")
        if kind.project and not trust.decide(turn.session, turn.settings, kind.path,
                                             kind.content, ctx.choose, purpose="agent file"):
            raise ToolError(f"The agent file {kind.path} is not trusted (the user refused it, "
                            "or another user owns it): nothing of it was used. Use another "
                            "kind or do the task yourself.")
        if args["isolation"] != "overlay":
            answer, session, cost = _run(turn, ctx, kind, args["prompt"])
            return child.result(answer, session, cost)
        copy = Overlay(turn.session.root)
        try:
            copy.make()
            answer, session, cost = _run(turn, ctx, kind, args["prompt"], copy.copy)
            said, items = copy.settle(ctx)
        finally:
            copy.remove()
        return child.result(f"{answer}\n\n{said}", session, cost, items)


def _run(turn, ctx, kind, prompt, root=None):
    try:
        return child.run_child(turn, ctx.call_id, kind, prompt, root)
    except ProviderError as exc:
        raise ToolError(f"The sub-agent failed: {exc}") from None
