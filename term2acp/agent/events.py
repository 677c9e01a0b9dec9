"""Plain runtime events. ``acp/translate.py`` is the one place that turns them into wire
``session/update`` payloads; nothing in the runtime knows the wire shapes.
"""

from dataclasses import dataclass
from typing import Any


@dataclass
class StateChanged:
    state: str  # "running" | "idle" | "requires_action"
    stop_reason: str | None = None
    meta: dict | None = None
    usage: dict | None = None  # tokens of the settled turn: input, output, thought, cached


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
