"""Interactions and decisions: what a tool asks and what comes back.

A tool that needs approval describes it with :class:`ApprovalRequest`; the turn turns
that into an :class:`Interaction` (id, the call it is about, offered choices) and blocks
on the session's approval gate, which returns a :class:`Decision`. Every doubtful path is
a denial: the gate never defaults to allow. An allow that arrives after the prompt was
cancelled, or for an interaction that is no longer the pending one
(``sessions/lifecycle.py``), is a denial that also ends the turn (``abort_turn``).
"""

from term2acp.core.record import Record

ORDINARY = "ordinary"
FOLDER_READ = "folder_read"
OUTSIDE_EDIT = "outside_workspace_edit"
MCP_TOOL = "mcp_tool"  # the first call of an MCP server tool (term2acp/mcp/adapter.py)
NETWORK = "sandbox_network_access"  # a shell command asks for the host network
COMMAND = "command"  # a shell command in ask mode (tools/shell_policy.py)
PLAN_READY = "plan_ready"  # plan mode's finish_plan: start the work, and how (tools/plan.py)
WEB_HOST = "web_host"  # web_fetch of a public host (term2acp/tools/web_fetch.py)
WEB_PRIVATE = "web_private"  # web_fetch of a loopback or private address: never remembered
TRUST = "trust"  # a file the workspace supplies (hooks, commands, .mcp.json): core/trust.py
QUESTION = "question"  # ask_user without elicitation: the answers are the request's choices

# (choice id, label, ACP permission option kind). Only choices with an ACP kind exist here:
# unsandboxed-once and allow-remember are never offered, reject_always is never used.
# Where a variant offers several options of one kind, the narrowest comes last: clients
# that key the options by kind keep the last of each (CodeCompanion's diff view), so
# there the narrowest grant is the one reachable.
CHOICES = {
    ORDINARY: (
        ("approve", "Allow", "allow_once"),
        ("reject", "Reject", "reject_once"),
    ),
    FOLDER_READ: (
        ("allow-once", "Allow once", "allow_once"),
        ("allow-folder-session", "Allow folder for session", "allow_always"),
        ("reject", "Reject", "reject_once"),
    ),
    OUTSIDE_EDIT: (
        ("allow-once", "Allow once", "allow_once"),
        ("allow-edit-folder-session", "Allow folder for session", "allow_always"),
        ("allow-edit-file-session", "Allow file for session", "allow_always"),
        ("reject", "Reject", "reject_once"),
    ),
    MCP_TOOL: (
        ("allow-once", "Allow once", "allow_once"),
        ("allow-tool-session", "Allow this tool for the session", "allow_always"),
        ("reject", "Reject", "reject_once"),
    ),
    # The network is the host's whole network (any host, any port, the host's own
    # 127.0.0.1 included) for the command: no choice names a command prefix, since what a
    # program runs with it (git's --upload-pack, npm scripts) is not what its words say.
    NETWORK: (
        ("allow-once", "Allow once (this command gets the host's whole network)",
         "allow_once"),
        ("allow-network-session", "Allow the host's whole network to every command of this "
                                  "session", "allow_always"),
        ("reject", "Reject", "reject_once"),
    ),
    # "{prefix}": the first words of the command as the user sees them; a choice with it is
    # offered only when the command has such words (one simple command: tools/shell_policy)
    COMMAND: (
        ("allow-once", "Allow once", "allow_once"),
        ("allow-command-prefix-session", "Allow commands that start with `{prefix}` for this "
                                         "session", "allow_always"),
        ("reject", "Reject", "reject_once"),
    ),
    PLAN_READY: (
        ("plan-start-auto", "Start, auto", "allow_always"),  # distinct kinds: clients keep one
        ("plan-start-ask", "Start, ask for every change", "allow_once"),
        ("plan-keep", "Keep planning", "reject_once"),
    ),
    WEB_HOST: (
        ("allow-once", "Allow once", "allow_once"),
        ("allow-host-session", "Allow this host for the session", "allow_always"),
        ("reject", "Reject", "reject_once"),
    ),
    QUESTION: (),  # the request brings its own choices (tools/ask_user.py)
    WEB_PRIVATE: (
        ("allow-once", "Allow once", "allow_once"),
        ("reject", "Reject", "reject_once"),
    ),
    TRUST: (  # allow always is remembered per path and SHA-256 in the data dir
        ("trust-always", "Always allow this file (as it is now)", "allow_always"),
        ("trust-once", "Allow once (this session)", "allow_once"),
        ("reject", "Reject (not used in this session)", "reject_once"),
    ),
}


def choices_for(variant, prefix=None):
    """The choices offered for ``variant``: with the command prefix in their labels, and
    without the prefix choices when there is none."""
    out = []
    for choice_id, label, kind in CHOICES[variant]:
        if "{prefix}" in label:
            if not prefix:
                continue
            label = label.replace("{prefix}", prefix)
        out.append((choice_id, label, kind))
    return tuple(out)

DENIED_BY_CLIENT = "Permission denied by client."
CANCELLED = "Permission request was cancelled."
UNKNOWN_OPTION = "Client selected an unknown permission option."
FAILED = "Permission request failed."
NOT_SUPPORTED = "Approval is not yet supported over ACP."
TIMED_OUT = "No response to the permission request before the timeout."


class ApprovalRequest(Record):
    """What a tool asks for. ``path`` is the canonical target the grant would cover."""

    __slots__ = ("variant", "path", "title", "content", "grant", "prefix", "choices")

    def __init__(self, variant=ORDINARY, path=None, title="", content=None, grant=None,
                 prefix=None, choices=None):
        self.variant = variant
        self.choices = choices  # (id, label, kind)s instead of the variant's (QUESTION)
        self.path = path
        self.title = title
        self.content = [] if content is None else content  # e.g. a diff preview
        self.grant = grant  # what allow-tool-session grants, e.g. ("mcp", server, tool)
        self.prefix = prefix  # a command's first words (tuple) a prefix choice would grant


class Interaction(Record):
    __slots__ = ("id", "variant", "call_id", "tool_name", "title", "kind", "raw_input",
                 "locations", "content", "path", "prefix", "offered", "parent")

    def __init__(self, id, variant, call_id, tool_name, title, kind, raw_input,  # noqa: A002
                 locations, content, path, prefix=None, offered=None, parent=None):
        self.offered = offered  # the request's own choices, if it brought them
        self.id = id
        self.variant = variant
        self.call_id = call_id
        self.tool_name = tool_name
        self.title = title
        self.kind = kind
        self.raw_input = raw_input
        self.locations = locations
        self.content = content
        self.path = path
        self.prefix = prefix  # the shown command prefix (str) of a prefix choice, or None
        self.parent = parent  # a sub-agent's question: the id of the agent call that runs it

    @property
    def choices(self):
        if self.offered:
            return tuple(self.offered)
        return choices_for(self.variant, self.prefix)


class Decision(Record):
    __slots__ = ("allowed", "choice", "reason", "abort_turn")

    def __init__(self, allowed, choice=None, reason="", abort_turn=False):
        self.allowed = allowed
        self.choice = choice
        self.reason = reason
        self.abort_turn = abort_turn  # cancelled, closed or superseded: the turn ends cancelled

    @classmethod
    def deny(cls, reason, abort_turn=False):
        return cls(False, None, reason, abort_turn)
