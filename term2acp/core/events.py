"""Plain runtime events. ``acp/translate.py`` is the one place that turns them into wire
``session/update`` payloads; nothing in the runtime knows the wire shapes.
"""

from dataclasses import dataclass
from typing import Any


@dataclass
class StateChanged:
    """A transition of the prompt lifecycle (``sessions/lifecycle.py``, the only sender)."""

    state: str  # "running" | "idle" | "requires_action"
    outcome: Any = None  # idle: the turn's sessions.lifecycle.Outcome (reason, error, usage)


@dataclass
class UserMessage:
    message_id: str
    content: list  # ACP content blocks as received (already validated)


@dataclass
class TextChunk:
    message_id: str
    text: str


@dataclass
class ThoughtChunk:
    message_id: str
    text: str


@dataclass
class ToolCallReported:
    """Upsert of a tool call; ``None`` fields are left as they were."""

    call_id: str
    title: str | None = None
    kind: str | None = None
    status: str | None = None  # pending | in_progress | completed | failed | cancelled
    raw_input: Any = None
    locations: list | None = None  # [{"path": abs, "line": int?}]
    content: list | None = None  # display items, see tools/base.py ToolResult.content
    raw_output: Any = None
    name: str | None = None


@dataclass
class TerminalStarted:
    terminal_id: str
    command: str
    cwd: str


@dataclass
class TerminalOutput:
    terminal_id: str
    data: bytes


@dataclass
class TerminalExited:
    terminal_id: str
    exit_code: int | None = None
    signal: str | None = None


@dataclass
class UsageReported:
    used: int
    size: int
    cost: dict | None = None  # {"amount": float, "currency": "USD"}


@dataclass
class SessionInfoChanged:
    title: str | None = None
    updated_at: str | None = None


@dataclass
class ConfigChanged:
    """The session's choices changed (model, effort, mode); ``options`` is the full list
    as :mod:`term2acp.sessions.options` describes it (runtime-neutral)."""

    options: list


@dataclass
class PlanUpdated:
    """The whole plan: ``entries`` are ``{"content", "status", "priority"}``."""

    plan_id: str
    entries: list


@dataclass
class Notice:
    """A message from term2 itself, not the model (an error that ended the turn, a retry,
    the project instructions it read): an agent message on the wire, never in the model's
    history."""

    message_id: str
    text: str


@dataclass
class CompactionReported:
    """A context compaction (``agent/context.py``): ``in_progress``, then ``completed`` (with
    the summary), ``failed`` (with the error) or ``cancelled``. ``text`` is what a client
    without compaction support reads instead (an agent message)."""

    compaction_id: str
    status: str
    summary: str | None = None
    error: str | None = None
    text: str | None = None
    reason: str | None = None  # manual | threshold | overflow
