"""Interactions and decisions: what a tool asks and what comes back.

A tool that needs approval describes it with :class:`ApprovalRequest`; the turn turns
that into an :class:`Interaction` (id, the call it is about, offered choices) and blocks
on the session's approval gate, which returns a :class:`Decision`. Every doubtful path is
a denial: the gate never defaults to allow. An allow that arrives after the prompt was
cancelled, or for an interaction that is no longer the pending one
(``sessions/lifecycle.py``), is a denial that also ends the turn (``abort_turn``).
"""

from dataclasses import dataclass, field
from typing import Any

ORDINARY = "ordinary"
FOLDER_READ = "folder_read"
OUTSIDE_EDIT = "outside_workspace_edit"
MCP_TOOL = "mcp_tool"  # the first call of an MCP server tool (term2acp/mcp/adapter.py)

# (choice id, label, ACP permission option kind). Only choices with an ACP kind exist here:
# unsandboxed-once and allow-remember are never offered, reject_always is never used.
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
        ("allow-edit-file-session", "Allow file for session", "allow_always"),
        ("allow-edit-folder-session", "Allow folder for session", "allow_always"),
        ("reject", "Reject", "reject_once"),
    ),
    MCP_TOOL: (
        ("allow-once", "Allow once", "allow_once"),
        ("allow-tool-session", "Allow this tool for the session", "allow_always"),
        ("reject", "Reject", "reject_once"),
    ),
}

DENIED_BY_CLIENT = "Permission denied by client."
CANCELLED = "Permission request was cancelled."
UNKNOWN_OPTION = "Client selected an unknown permission option."
FAILED = "Permission request failed."
NOT_SUPPORTED = "Approval is not yet supported over ACP."
TIMED_OUT = "No response to the permission request before the timeout."


@dataclass
class ApprovalRequest:
    """What a tool asks for. ``path`` is the canonical target the grant would cover."""

    variant: str = ORDINARY
    path: str | None = None
    title: str = ""
    content: list = field(default_factory=list)  # e.g. a diff preview
    grant: tuple | None = None  # what allow-tool-session grants, e.g. ("mcp", server, tool)


@dataclass
class Interaction:
    id: str
    variant: str
    call_id: str
    tool_name: str
    title: str
    kind: str
    raw_input: Any
    locations: list
    content: list
    path: str | None

    @property
    def choices(self):
        return CHOICES[self.variant]


@dataclass
class Decision:
    allowed: bool
    choice: str | None = None
    reason: str = ""
    abort_turn: bool = False  # cancelled, closed or superseded: the turn ends cancelled

    @classmethod
    def deny(cls, reason, abort_turn=False):
        return cls(False, None, reason, abort_turn)
