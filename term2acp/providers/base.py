"""The provider protocol: stream one model turn into plain events.

Conversation messages are provider-neutral dicts:

* ``{"role": "user", "content": str}``
* ``{"role": "assistant", "content": str, "thought": str | None,
  "tool_calls": [{"id": str, "name": str, "arguments": str}]}``  (arguments: raw JSON text)
* ``{"role": "tool", "tool_call_id": str, "name": str, "content": str, "is_error": bool}``

``Provider.stream(request)`` is a generator of the event dataclasses below, ending with
exactly one :class:`Stop` (HTTP providers may yield :class:`Retrying` before any content).
It runs in the turn greenlet; cancellation is a ``GreenletExit`` raised at any yield or
blocking point, so implementations close their HTTP streams in ``finally``. Failures raise
:class:`ProviderError` (subclasses in ``errors.py``) with a short message that is safe to
show (never an API key).
"""

from dataclasses import dataclass, field

from term2acp.providers.errors import ProviderError, ProviderNotConfigured  # noqa: F401


@dataclass
class TextDelta:
    text: str


@dataclass
class ThoughtDelta:
    text: str


@dataclass
class ToolCall:
    call_id: str
    name: str
    arguments: str  # raw JSON text as the model produced it (may be malformed)


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    thought_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = None


@dataclass
class Retrying:
    """The request failed with a retryable error; it is sent again after ``delay`` seconds.

    Only ever yielded before the first content event. A consumer may show it ("retrying in
    N s (reason)") or ignore it.
    """

    attempt: int  # 1 for the first retry
    delay: float
    reason: str  # e.g. "HTTP 429 Too Many Requests", "connection reset"


@dataclass
class Stop:
    reason: str  # end_turn | tool_use | max_tokens | refusal


@dataclass
class ModelRequest:
    model: str
    system: str
    messages: list
    tools: list = field(default_factory=list)  # [{"name", "description", "parameters"}]
    effort: str = "default"  # default none minimal low medium high xhigh
    max_output_tokens: int | None = None


class Provider:
    name = ""

    def stream(self, request):
        raise NotImplementedError

    def context_window(self, model):
        return None
