"""Session modes: how much the agent may do without asking.

* ``read-only``: no writes and no commands. Calls of tools that could change anything
  (every kind but read, search, think and fetch) are refused without asking, and the
  model is told so (a context note, turns/notes.py).
* ``plan``: the same refusals, every fetch asks first, and the model has one more tool
  (``finish_plan``, ``tools/plan.py``) that asks the user to start the work: "start,
  auto", "start, ask for every change" or "keep planning"; starting switches the mode
  and the work goes on in the same turn. Which calls are refused comes from each tool's
  ``kind`` (its write/run classification), never from its name.
* ``ask``: every such call asks the editor, whatever the tool's own policy says, and
  session grants ("allow for this session") are not consulted; but a tool that applies
  ask mode itself (``applies_ask_mode``: the shell, whose "commands that start with ..."
  grant is for this mode, ``tools/shell_policy.py``) asks its own questions.
* ``auto`` (the default): today's policy: writes inside the workspace and sandboxed
  commands run; everything else asks.

No mode runs commands unsandboxed or skips the fail-closed rules.
"""

from term2acp.core.approvals import ORDINARY, ApprovalRequest
from term2acp.core.option_values import MODE_IDS

READ_ONLY, PLAN, ASK, AUTO = MODE_IDS
MODES = (
    (READ_ONLY, "Read only", "Reads and searches only: no file changes, no commands"),
    (PLAN, "Plan", "Reads, searches and writes a plan; changes nothing until you start the "
                   "work"),
    (ASK, "Ask", "Asks before every file change and every command"),
    (AUTO, "Auto", "Changes files in the workspace and runs sandboxed commands; asks for "
                   "anything else"),
)
SAFE_KINDS = frozenset({"read", "search", "think", "fetch"})

READ_ONLY_REFUSAL = (
    "Refused: the session is in read-only mode, so {name} (which could change files or run "
    "commands) is not allowed. Do not retry it: answer from what you can read, or tell the "
    "user which change to make or to switch the mode to ask or auto.")

PLAN_REFUSAL = (
    "Refused: the session is in plan mode, so {name} (which could change files or run "
    "commands) is not allowed yet. Keep reading and planning; when the plan is ready, call "
    "finish_plan so the user can start the work.")

def normal(mode):
    return mode if mode in MODE_IDS else AUTO


def changes_things(tool):
    return getattr(tool, "kind", "other") not in SAFE_KINDS


def offered(mode, tool):
    """Whether the model is offered ``tool`` in ``mode`` (``Tool.modes``: None = all); the
    one mode filter (a prompt's tools, each model request's, each call's check)."""
    only = getattr(tool, "modes", None)
    return only is None or mode in only


def offered_tools(mode, tools):
    """The tools (name -> Tool) of ``tools`` the model is offered in ``mode``."""
    return {name: tool for name, tool in tools.items() if offered(mode, tool)}


def check(mode, tool, title, request):
    """Apply the mode to one call: ``(refusal text or None, approval request or None)``.

    ``request`` is what the tool's own policy asks (None: it would run without asking).
    """
    if mode == PLAN and getattr(tool, "kind", "other") == "fetch":
        return None, _ask_always(tool, title, request)  # web fetch after approval
    if not changes_things(tool):
        return None, request
    if mode == READ_ONLY:
        return READ_ONLY_REFUSAL.format(name=tool.name), None
    if mode == PLAN:
        return PLAN_REFUSAL.format(name=tool.name), None
    if mode == ASK:
        if getattr(tool, "applies_ask_mode", False):  # its own questions (tools/shell_policy)
            return None, request
        return None, _ask_always(tool, title, request)
    return None, request


def _ask_always(tool, title, request):
    if request is not None and request.variant == ORDINARY:
        return request
    # Grants are not consulted: one ordinary question, whatever the tool's policy.
    base = request or ApprovalRequest()
    return ApprovalRequest(variant=ORDINARY, path=None,
                           title=base.title or title or f"Run {tool.name}?",
                           content=list(base.content))
