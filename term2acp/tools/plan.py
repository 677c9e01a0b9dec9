"""``update_plan``: the model keeps a plan the editor shows (v2 ``plan_update``, v1 ``plan``).

Each call sends the whole plan; the explanation is shown as a short agent thought. The
plan id is stable within the session, so the editor replaces one plan. The plan is
journaled, so replay shows it.
"""

from marshmallow import Schema, fields, validate

from term2acp.core import events as ev
from term2acp.core.approvals import PLAN_READY, ApprovalRequest
from term2acp.core.ids import new_id
from term2acp.tools.base import Tool, ToolError, ToolResult

STATUSES = ("pending", "in_progress", "completed")
MAX_STEPS = 100
EXPLANATION_CAP = 500


class StepParams(Schema):
    step = fields.String(required=True, validate=validate.Length(min=1, max=2000),
                         metadata={"description": "What this step does, in a short sentence."})
    status = fields.String(required=True, validate=validate.OneOf(STATUSES),
                           metadata={"description": "pending, in_progress or completed."})


class UpdatePlanParams(Schema):
    explanation = fields.String(load_default=None, allow_none=True, metadata={
        "description": "Optional: why the plan changed, in one short sentence."})
    plan = fields.List(fields.Nested(StepParams), required=True,
                       validate=validate.Length(max=MAX_STEPS),
                       metadata={"description": "The whole plan, every step with its status."})


def plan_id(session_id):
    return f"plan-{session_id}"


class UpdatePlanTool(Tool):
    name = "update_plan"
    kind = "think"
    quiet = True  # the plan update shows it
    Params = UpdatePlanParams
    description = (
        "Keep a plan for multi-step work, shown to the user. For any task that takes more "
        "than a couple of steps, call it first with the steps (one in_progress), then again "
        "whenever a step starts or finishes, always with the whole plan. At most one step is "
        "in_progress at a time. Skip it for simple one-step requests.")

    def title(self, args):
        return "Update the plan"

    def run(self, args, ctx):
        steps = args["plan"]
        if sum(1 for s in steps if s["status"] == "in_progress") > 1:
            raise ToolError("at most one step may be in_progress; send the plan again with "
                            "one step in_progress")
        explanation = (args.get("explanation") or "").strip()
        if explanation:
            ctx.emit(ev.ThoughtChunk(new_id("thought"), explanation[:EXPLANATION_CAP]))
        entries = [{"content": s["step"], "status": s["status"], "priority": "medium"}
                   for s in steps]
        ctx.emit(ev.PlanUpdated(plan_id(ctx.session_id), entries))
        done = sum(1 for s in steps if s["status"] == "completed")
        return ToolResult(f"Plan updated: {done}/{len(steps)} steps completed.")


class FinishPlanParams(Schema):
    summary = fields.String(required=True, validate=validate.Length(min=1, max=20_000),
                            metadata={"description": "The plan in brief: what will change "
                                                     "and how, for the user to approve."})


START = {"plan-start-auto": "auto", "plan-start-ask": "ask"}


class FinishPlanTool(Tool):
    """Plan mode's way out: the user chooses to start (and the mode) or to keep planning."""

    name = "finish_plan"
    kind = "think"
    modes = frozenset({"plan"})
    Params = FinishPlanParams
    description = (
        "Plan mode only: call it when your plan is ready (after reading what you need and "
        "keeping the steps with update_plan). The user sees the summary and chooses to "
        "start the work (then the mode allows changes and you carry the plan out right "
        "away) or to keep planning (then the turn ends and the user tells you more).")

    def title(self, args):
        return "The plan is ready: start the work?"

    def run(self, args, ctx):
        if ctx.choose is None or ctx.set_mode is None:
            raise ToolError("finish_plan is not available here")
        summary = args["summary"].strip()
        choice = ctx.choose(ApprovalRequest(variant=PLAN_READY, title=self.title(args),
                                            content=[{"type": "text", "text": summary}]))
        mode = START.get(choice)
        if mode is None:
            return ToolResult("The user chose to keep planning: the turn ends here. Wait for "
                              "what the user says next; stay in plan mode.", end_turn=True)
        ctx.set_mode(mode)
        how = "asks the user before every change and command" if mode == "ask" else \
            "changes files in the workspace and runs sandboxed commands"
        return ToolResult(f"The user approved the plan and switched the session to {mode} "
                          f"mode (it {how}). Start the work now, following the plan, and keep "
                          "the steps up to date with update_plan.")
