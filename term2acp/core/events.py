"""Plain runtime events. ``acp/v2/translate.py`` is the one place that turns them into wire
``session/update`` payloads; nothing in the runtime knows the wire shapes.

Each is a :class:`~term2acp.core.record.Record` (slots and a plain ``__init__``: cheap to
import and to make, one per streamed chunk); fields and defaults are as written here.
"""

from term2acp.core.record import Record


class StateChanged(Record):
    """A transition of the prompt lifecycle (``sessions/lifecycle.py``, the only sender)."""

    __slots__ = ("state", "outcome")

    def __init__(self, state, outcome=None):
        self.state = state  # "running" | "idle" | "requires_action"
        self.outcome = outcome  # idle: the turn's sessions.lifecycle.Outcome


class UserMessage(Record):
    __slots__ = ("message_id", "content")

    def __init__(self, message_id, content):
        self.message_id = message_id
        self.content = content  # ACP content blocks as received (already validated)


class TextChunk(Record):
    __slots__ = ("message_id", "text")

    def __init__(self, message_id, text):
        self.message_id = message_id
        self.text = text


class ThoughtChunk(Record):
    __slots__ = ("message_id", "text")

    def __init__(self, message_id, text):
        self.message_id = message_id
        self.text = text


class ToolCallReported(Record):
    """Upsert of a tool call; ``None`` fields are left as they were."""

    __slots__ = ("call_id", "title", "kind", "status", "raw_input", "locations", "content",
                 "raw_output", "name", "parent")

    def __init__(self, call_id, title=None, kind=None, status=None, raw_input=None,
                 locations=None, content=None, raw_output=None, name=None, parent=None):
        self.call_id = call_id
        self.title = title
        self.kind = kind
        self.status = status  # pending | in_progress | completed | failed | cancelled
        self.raw_input = raw_input
        self.locations = locations  # [{"path": abs, "line": int?}]
        self.content = content  # display items, see tools/base.py ToolResult.content
        self.raw_output = raw_output
        self.name = name
        self.parent = parent  # a sub-agent's call: the id of the agent call that runs it


class TerminalStarted(Record):
    __slots__ = ("terminal_id", "command", "cwd", "call_id")

    def __init__(self, terminal_id, command, cwd, call_id=None):
        self.terminal_id = terminal_id
        self.command = command
        self.cwd = cwd
        self.call_id = call_id  # the tool call that runs it (calls of a round run side by side)


class TerminalOutput(Record):
    __slots__ = ("terminal_id", "data")

    def __init__(self, terminal_id, data):
        self.terminal_id = terminal_id
        self.data = data  # bytes


class TerminalExited(Record):
    __slots__ = ("terminal_id", "exit_code", "signal")

    def __init__(self, terminal_id, exit_code=None, signal=None):
        self.terminal_id = terminal_id
        self.exit_code = exit_code
        self.signal = signal


class UsageReported(Record):
    __slots__ = ("used", "size", "cost")

    def __init__(self, used, size, cost=None):
        self.used = used
        self.size = size
        self.cost = cost  # {"amount": float, "currency": "USD"}


class SessionInfoChanged(Record):
    __slots__ = ("title", "updated_at")

    def __init__(self, title=None, updated_at=None):
        self.title = title
        self.updated_at = updated_at


class ConfigChanged(Record):
    """The session's choices changed (model, effort, mode); ``options`` is the full list
    as :mod:`term2acp.sessions.config_options` describes it (runtime-neutral)."""

    __slots__ = ("options",)

    def __init__(self, options):
        self.options = options


class CommandsChanged(Record):
    """The session's slash commands changed (its MCP servers' prompts, sign-in): the
    editor is sent the whole list again."""

    __slots__ = ()


class PlanUpdated(Record):
    """The whole plan: ``entries`` are ``{"content", "status", "priority"}``."""

    __slots__ = ("plan_id", "entries")

    def __init__(self, plan_id, entries):
        self.plan_id = plan_id
        self.entries = entries


class Notice(Record):
    """A message from term2 itself, not the model (an error that ended the turn, a retry,
    the project instructions it read): an agent message on the wire, never in the model's
    history."""

    __slots__ = ("message_id", "text")

    def __init__(self, message_id, text):
        self.message_id = message_id
        self.text = text


class CompactionReported(Record):
    """A context compaction (``turns/context.py``): ``in_progress``, then ``completed`` (with
    the summary), ``failed`` (with the error) or ``cancelled``. ``text`` is what a client
    without compaction support reads instead (an agent message)."""

    __slots__ = ("compaction_id", "status", "summary", "error", "text", "reason")

    def __init__(self, compaction_id, status, summary=None, error=None, text=None,
                 reason=None):
        self.compaction_id = compaction_id
        self.status = status
        self.summary = summary
        self.error = error
        self.text = text
        self.reason = reason  # manual | threshold | overflow
