"""The provider protocol: stream one model turn into plain events.

Conversation messages are provider-neutral dicts:

* ``{"role": "user", "content": str}``
* ``{"role": "assistant", "content": str, "thought": str | None,
  "tool_calls": [{"id": str, "name": str, "arguments": str}]}``  (arguments: raw JSON text;
  optional ``replay``: see :class:`Replay`)
* ``{"role": "tool", "tool_call_id": str, "name": str, "content": str, "is_error": bool}``

``Provider.stream(request)`` is a generator of the event dataclasses below, ending with
exactly one :class:`Stop` (HTTP providers may yield :class:`Retrying` before any content).
It runs in the turn greenlet; cancellation is a ``GreenletExit`` raised at any yield or
blocking point, so implementations close their HTTP streams in ``finally``. Failures raise
:class:`ProviderError` (subclasses in ``errors.py``) with a short message that is safe to
show (never an API key).
"""

import logging
import math

from term2acp.providers.errors import ProviderError, ProviderNotConfigured  # noqa: F401

log = logging.getLogger(__name__)


class _Record:
    """A small value record: fields in ``__slots__`` order, defaults in ``_defaults`` (a
    callable default makes a fresh value), equality and repr by fields, like a dataclass.
    Plain classes because creating seven dataclasses costs milliseconds, and this module
    is imported on the first prompt's path."""

    __slots__ = ()
    _defaults = {}
    __hash__ = None

    def __init__(self, *args, **kwargs):
        names = self.__slots__
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__}() takes {len(names)} arguments")
        for name, value in zip(names, args):
            if name in kwargs:
                raise TypeError(f"{type(self).__name__}() got {name!r} twice")
            setattr(self, name, value)
        for name in names[len(args):]:
            if name in kwargs:
                value = kwargs.pop(name)
            elif name in self._defaults:
                value = self._defaults[name]
                value = value() if callable(value) else value
            else:
                raise TypeError(f"{type(self).__name__}() is missing {name!r}")
            setattr(self, name, value)
        if kwargs:
            raise TypeError(f"{type(self).__name__}() got unexpected {sorted(kwargs)}")

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    def __repr__(self):
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__)
        return f"{type(self).__name__}({fields})"


class TextDelta(_Record):
    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text


class ThoughtDelta(_Record):
    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text


class ToolCall(_Record):
    # arguments: raw JSON text as the model produced it (may be malformed)
    __slots__ = ("call_id", "name", "arguments")


class Usage(_Record):
    # input_tokens: the whole prompt, cache reads (cached_tokens) and writes
    # (cache_write_tokens) included; cost_usd: float | None, when the server says it;
    # web_searches: searches the provider ran for the request (WebSearch), billed apiece
    # model: the model the request was billed as when it is not the session's (an Azure
    # deployment's model), None otherwise
    __slots__ = ("input_tokens", "output_tokens", "thought_tokens", "cached_tokens", "cost_usd",
                 "cache_write_tokens", "web_searches", "model")
    _defaults = {"input_tokens": 0, "output_tokens": 0, "thought_tokens": 0, "cached_tokens": 0,
                 "cost_usd": None, "cache_write_tokens": 0, "web_searches": 0, "model": None}

    def __init__(self, *args, **kwargs):
        """What a server says is checked: a count that is not a non-negative integer
        (NaN, negative, text, ...) is dropped (0) with a warning, a cost that is not a
        finite non-negative number too (None)."""
        super().__init__(*args, **kwargs)
        for name in self.__slots__:
            value = getattr(self, name)
            if name == "cost_usd":
                if value is not None and not _amount(value):
                    log.warning("the provider's usage has cost_usd %.40r: dropped", value)
                    self.cost_usd = None
            elif name == "model":
                if value is not None and not isinstance(value, str):
                    self.model = None
            else:
                setattr(self, name, token_count(value, name))


def token_count(value, name="a count"):
    """``value`` as a count of tokens: a non-negative integer (an integral float is
    taken), else 0 with a warning."""
    if type(value) is int and value >= 0:
        return value
    if type(value) is float and math.isfinite(value) and value >= 0 and value.is_integer():
        return int(value)
    log.warning("the provider's usage has %s %.40r, not a count: dropped", name, value)
    return 0


def _amount(value):
    return type(value) in (int, float) and math.isfinite(value) and value >= 0


class Replay(_Record):
    """Provider state the model must get back with this answer in later requests, as it
    was sent (Anthropic's signed thinking blocks, OpenAI's encrypted reasoning items).
    The turn keeps it in the assistant message (``replay``: ``{"kind", "items"}``), so
    it is stored and a resumed session sends the same bytes; a provider uses only
    items of its own ``kind``."""

    __slots__ = ("kind", "items")


class WebSearch(_Record):
    """A web search the provider's server runs for the model (Anthropic's ``web_search``
    server tool, the Responses API's ``web_search_call``), yielded as it goes: the turn
    shows it to the user as a fetch call. Nothing runs here and no result is sent back:
    the provider's own record of the search goes back with the answer (its
    :class:`Replay`). ``search_id``: the provider's id; ``status``: in_progress,
    completed or failed; ``action``: ``{"type": "search", "query"}`` (or ``open_page`` /
    ``find_in_page`` with ``url`` and ``pattern``), None until known; ``results``:
    ``[{"url", "title"}]``; ``error``: the provider's error code of a failed search."""

    __slots__ = ("search_id", "status", "action", "results", "error")
    _defaults = {"action": None, "results": list, "error": None}


class Retrying(_Record):
    """The request failed with a retryable error; it is sent again after ``delay`` seconds.

    Only ever yielded before the first content event. A consumer may show it ("retrying in
    N s (reason)") or ignore it. ``attempt`` is 1 for the first retry; ``reason`` e.g.
    "HTTP 429 Too Many Requests", "connection reset".
    """

    __slots__ = ("attempt", "delay", "reason")


class Status(_Record):
    """A word for the user on the request's progress before the answer (a local model
    loading, with its size): shown as a thought, never part of the answer or the history."""

    __slots__ = ("text",)


class Stop(_Record):
    # end_turn | tool_use | max_tokens | refusal | pause (the server paused a long turn of
    # its own tools: the answer so far goes back as it is and the model goes on)
    __slots__ = ("reason",)

    def __init__(self, reason):
        self.reason = reason


class ModelRequest(_Record):
    # tools: [{"name", "description", "parameters"}]; effort: default none minimal low
    # medium high xhigh; purpose: "turn", or "compaction" for a summary request
    # (turns/context.py); cache_key: the session's id, for servers that route requests
    # with a shared prefix to one cache by a key; web_search: {"max_uses": n} to offer the
    # provider's own web search (providers whose ``web_search`` is True), None: not offered;
    # agent: the id of the agent call whose sub-agent sends it (None: the session's own turn)
    __slots__ = ("model", "system", "messages", "tools", "effort", "max_output_tokens", "purpose",
                 "cache_key", "web_search", "agent")
    _defaults = {"tools": list, "effort": "default", "max_output_tokens": None, "purpose": "turn",
                 "cache_key": None, "web_search": None, "agent": None}


class Provider:
    name = ""
    # True: one request at a time (an in-process model): a side request, such as a
    # session's title (turns/titles.py), would hold the next prompt's request, so none is sent
    serial = False
    # True: the provider's server can search the web for the model (ModelRequest.web_search)
    web_search = False

    def stream(self, request):
        raise NotImplementedError

    def context_window(self, model):
        return None

    def close(self):
        """Let go of what the provider holds between requests (an idle connection); it
        may still be used afterwards. Called when its session is released."""
