"""OpenAI's Responses API: request building and stream decoding (``openai.py`` sends it).

Spoken to the official endpoint by default (``api = "responses"``; ``"chat"`` elsewhere).
Requests are stateless (``store: false``): the whole conversation goes as ``input``
items, and the model's reasoning comes back encrypted (``include:
["reasoning.encrypted_content"]``) as ``reasoning`` output items, which are kept with the
assistant message (a :class:`~term2acp.providers.base.Replay`) and sent back in front of
it, so a reasoning model keeps its reasoning across the tool calls of a turn.
Reasoning summaries (``reasoning.summary: "auto"``) stream as thoughts.

Stream events (SSE, one JSON object each, no ``[DONE]``): ``response.output_text.delta``,
``response.reasoning_summary_text.delta`` (and ``response.reasoning_text.delta`` from
servers that show raw reasoning), ``response.refusal.delta``,
``response.output_item.added`` / ``.done`` (function calls: name, ``call_id`` and the
final ``arguments``; reasoning items with their ``encrypted_content``),
``response.function_call_arguments.delta``, and one of ``response.completed``,
``response.incomplete`` (``incomplete_details.reason``) or ``response.failed``
(``response.error``); an ``error`` event ends the stream with an error.

Web search (``ModelRequest.web_search``): the built-in ``{"type": "web_search"}`` tool,
with the sources asked for (``include: ["web_search_call.action.sources"]``) and at
most ``max_uses`` calls of built-in tools a response (``max_tool_calls``). A search
is a ``web_search_call`` output item (``response.web_search_call.in_progress`` /
``.searching`` / ``.completed`` between its added and done events; its ``action``:
``search`` with ``query`` and ``sources``, ``open_page``, ``find_in_page``), reported as
:class:`~term2acp.providers.base.WebSearch` events. Stateless requests cannot refer to it
by id, so it goes back in its place among the reasoning items without its id (and
without the sources, which only the response carries).
"""

import logging

from term2acp.providers.base import ProviderError, Replay, Stop, TextDelta, ThoughtDelta, \
    ToolCall, Usage, WebSearch

log = logging.getLogger(__name__)

REPLAY_KIND = "openai-responses"
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
INCOMPLETE = {"max_output_tokens": "max_tokens", "content_filter": "refusal"}


# ---------------------------------------------------------------- request building
def response_params(request, cache_key=None):
    params = {"model": request.model, "input": input_items(request.messages),
              "stream": True, "store": False}
    if request.system:
        params["instructions"] = request.system
    if request.tools:
        params["tools"] = [{"type": "function", "name": t["name"],
                            "description": t.get("description", ""),
                            "parameters": t.get("parameters") or {"type": "object",
                                                                  "properties": {}},
                            "strict": False} for t in request.tools]
    if request.web_search:
        params.setdefault("tools", []).append({"type": "web_search"})
        _include(params, "web_search_call.action.sources")
        if request.web_search.get("max_uses"):  # counts built-in tools only: the search
            params["max_tool_calls"] = request.web_search["max_uses"]
    if request.effort in EFFORTS:
        params["reasoning"] = {"effort": request.effort, "summary": "auto"}
        _include(params, "reasoning.encrypted_content")
    elif request.effort not in (None, "default"):
        log.warning("unknown effort %r ignored", request.effort)
    if request.max_output_tokens:
        params["max_output_tokens"] = request.max_output_tokens
    if cache_key:
        params["prompt_cache_key"] = cache_key
    return params


def with_reasoning(params):
    """A reasoning model given no effort still streams its summaries and returns its
    encrypted reasoning (``effort`` left to the model's default)."""
    params.setdefault("reasoning", {"summary": "auto"})
    _include(params, "reasoning.encrypted_content")
    return params


def _include(params, field):
    include = params.setdefault("include", [])
    if field not in include:
        include.append(field)


def input_items(messages):
    out = []
    for message in messages:
        role = message["role"]
        if role == "user":
            out.append({"role": "user", "content": _user_content(message)})
        elif role == "assistant":
            out.extend(_assistant_items(message))
        elif role == "tool":
            output = message.get("content") or ""
            if message.get("is_error"):
                output = "Error: " + output
            out.append({"type": "function_call_output", "call_id": message["tool_call_id"],
                        "output": output})
            if message.get("images"):  # read_file on an image: shown after the result
                out.append({"role": "user", "content": [
                    {"type": "input_text", "text": "Images returned by the tool call above:"},
                    *_images(message)]})
        else:
            raise ValueError(f"unsupported message role {role!r}")
    return out


def _user_content(message):
    if not message.get("images"):
        return message["content"]
    return [{"type": "input_text", "text": message["content"]}, *_images(message)]


def _images(message):
    return [{"type": "input_image", "image_url": f"data:{image['mime_type']};base64,"
                                                 f"{image['data']}"}
            for image in message.get("images") or ()]


def _assistant_items(message):
    replay = message.get("replay")
    items = []
    if isinstance(replay, dict) and replay.get("kind") == REPLAY_KIND:
        items += [item for item in replay.get("items") or () if isinstance(item, dict)]
    if message.get("content"):
        items.append({"type": "message", "role": "assistant",
                      "content": [{"type": "output_text", "text": message["content"]}]})
    for call in message.get("tool_calls") or ():
        items.append({"type": "function_call", "call_id": call["id"], "name": call["name"],
                      "arguments": call.get("arguments") or "{}"})
    return items


# ---------------------------------------------------------------- stream decoding
class ResponseStreamState:
    """Accumulates one streamed response and turns its events into provider events."""

    def __init__(self):
        self.calls = {}  # output_index -> [call_id, name, arguments]
        self.kept = []  # finished reasoning and web search items, as they are sent back
        self.searches = {}  # output_index -> the web_search_call item's id
        self.status = None  # completed | incomplete | failed
        self.incomplete = None
        self.usage = None
        self.refused = False
        self.received = False
        self.failure = None  # the error of a failed response
        self.model = None  # the model the server says answered

    def feed(self, event):
        """Provider events for one stream event; raises ProviderError on ``failed``."""
        self.received = True
        kind = event.get("type") or ""
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            self.refused = self.refused or kind == "response.refusal.delta"
            if event.get("delta"):
                yield TextDelta(event["delta"])
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            if event.get("delta"):
                yield ThoughtDelta(event["delta"])
        elif kind == "response.reasoning_summary_part.added" and event.get("summary_index"):
            yield ThoughtDelta("\n\n")  # summary parts are paragraphs
        elif kind == "response.function_call_arguments.delta":
            slot = self.calls.setdefault(event.get("output_index"), ["", "", ""])
            slot[2] += event.get("delta") or ""
        elif kind in ("response.output_item.added", "response.output_item.done"):
            yield from self._item(event.get("output_index"), event.get("item") or {},
                                  kind.endswith(".done"))
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            self._end(kind.rsplit(".", 1)[1], event.get("response") or {})

    def _item(self, index, item, done):
        kind = item.get("type")
        if kind == "function_call":
            slot = self.calls.setdefault(index, ["", "", ""])
            slot[0] = item.get("call_id") or slot[0]
            slot[1] = item.get("name") or slot[1]
            if done and isinstance(item.get("arguments"), str):
                slot[2] = item["arguments"]  # the whole text, whatever deltas were missed
        elif kind == "reasoning" and done:
            kept = {"type": "reasoning", "summary": item.get("summary") or []}
            if item.get("encrypted_content"):
                kept["encrypted_content"] = item["encrypted_content"]
            self.kept.append(kept)
        elif kind == "web_search_call":
            yield self._search(index, item, done)

    def _search(self, index, item, done):
        """A web search item as its WebSearch event (the item goes back once done)."""
        search_id = self.searches.setdefault(index, item.get("id") or f"ws_{index}")
        action = item.get("action") if isinstance(item.get("action"), dict) else None
        if not done:
            return WebSearch(search_id, "in_progress", _action(action))
        kept = {"type": "web_search_call", "status": item.get("status") or "completed"}
        if action is not None:
            kept["action"] = {k: v for k, v in action.items() if k != "sources"}
        self.kept.append(kept)
        if item.get("status") == "failed":
            return WebSearch(search_id, "failed", _action(action))  # the API gives no reason
        sources = (action or {}).get("sources") or ()
        results = [{"url": s["url"], "title": s.get("title") or ""} for s in sources
                   if isinstance(s, dict) and isinstance(s.get("url"), str)]
        return WebSearch(search_id, "completed", _action(action), results=results)

    def _end(self, status, response):
        self.status = status
        self.model = response.get("model") or self.model
        self.usage = response.get("usage") or self.usage
        if status == "incomplete":
            self.incomplete = (response.get("incomplete_details") or {}).get("reason")
        elif status == "failed":
            self.failure = response.get("error") or {}

    def finish_events(self, name):
        if self.status is None:
            if not self.received:
                raise ProviderError(f"{name}: the server sent an empty response")
            raise ProviderError(f"{name}: the stream ended before the model finished")
        if self.kept:
            yield Replay(REPLAY_KIND, self.kept)
        for index in sorted(self.calls, key=lambda i: (i is None, i or 0)):
            call_id, tool, arguments = self.calls[index]
            if call_id and tool:
                yield ToolCall(call_id, tool, arguments or "{}")
        if isinstance(self.usage, dict) and self.usage:
            yield _usage(self.usage, len(self.searches))
        if self.status == "incomplete":
            yield Stop(INCOMPLETE.get(self.incomplete, "max_tokens"))
        elif self.calls:
            yield Stop("tool_use")
        else:
            yield Stop("refusal" if self.refused else "end_turn")


def _action(action):
    """A web search action in the neutral shape (base.WebSearch), or None."""
    if not isinstance(action, dict) or not isinstance(action.get("type"), str):
        return None
    return {k: v for k, v in action.items() if k in ("type", "query", "url", "pattern")
            and isinstance(v, str)}


def _usage(usage, searches=0):
    details = [usage.get(key) for key in ("input_tokens_details", "output_tokens_details")]
    cached, reasoning = (d.get(name) or 0 if isinstance(d, dict) else 0 for d, name in
                         zip(details, ("cached_tokens", "reasoning_tokens")))
    return Usage(input_tokens=usage.get("input_tokens") or 0,
                 output_tokens=usage.get("output_tokens") or 0,
                 thought_tokens=reasoning, cached_tokens=cached, web_searches=searches)
