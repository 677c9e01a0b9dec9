"""Anthropic Messages provider (streaming, tools, extended thinking).

It speaks the streaming API through :mod:`term2acp.providers.http` (no SDK: retries,
proxies, TLS and timeouts live there); ``anthropic_stream.py`` decodes the SSE events.

Extended thinking: when thinking is on, the API requires the assistant turn that made the
tool calls being answered to be resent with its signed thinking blocks. They come out of
the stream as a :class:`~term2acp.providers.base.Replay` the turn stores with the
assistant message, and go back in front of that message's blocks, byte for byte, in every
later request (also after a restart); when they are missing (a history from before they
were stored, or from another provider), thinking is switched off for that request.

Prompt caching: ``cache_control`` breakpoints on the last tool (the tool list), on the
system prompt, and on the last block of the latest two user turns (the rolling one: the
latest is written, the one before is what the previous request wrote, read back even
when a round of parallel tool calls put more than the server's 20-block look-back in
between). Four in all, the API's limit. ``cache_ttl = "1h"`` asks for the longer-lived
cache (written at twice the input price instead of 1.25 times).

Web search (``ModelRequest.web_search``): the server tool ``web_search_20250305`` goes
last in ``tools``. Each search streams as a ``server_tool_use`` block (its input by
``input_json`` deltas) and a ``web_search_tool_result`` block (the results with their
``encrypted_content``, or a ``web_search_tool_result_error``), reported as
:class:`~term2acp.providers.base.WebSearch` events. The API wants those blocks back in
later requests as they came, in their place among the answer's text blocks (whose
``citations`` point into them), so an answer that searched keeps all its blocks but
``tool_use`` in its Replay, in stream order, and they are sent instead of the plain
text. A request that does not offer the tool sends the plain text, as for any answer.
A turn the server paused (``pause_turn``, a long run of searches) goes back as it is and
the model goes on.
"""

import logging

from term2acp.providers.anthropic_stream import (
    REPLAY_KIND,
    SEARCH_BLOCKS,
    MessageStreamState,
    tool_input,
)
from term2acp.providers.base import Provider
from term2acp.providers.errors import MalformedResponse, ProviderNotConfigured
from term2acp.providers.http import HTTPClient
from term2acp.providers.openai import resolve_credentials, sse_json

log = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS = 8192
MIN_THINKING_BUDGET = 1024
THINKING_BUDGETS = {"low": 1024, "medium": 4096, "high": 16384, "xhigh": 32000}
CACHE_TTLS = ("5m", "1h")
DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
WEB_SEARCH_TOOL = "web_search_20250305"
THINKING = ("thinking", "redacted_thinking")


# ---------------------------------------------------------------- request building
def anthropic_messages(messages, signed=False, searching=False):
    """Neutral history -> Messages API turns; ``signed``: with the stored thinking blocks;
    ``searching``: the request offers web search (an answer that searched goes with its
    search blocks)."""
    out = []
    for message in messages:
        role = message["role"]
        if role == "user":
            append_turn(out, "user", _image_blocks(message) + _user_blocks(message["content"]))
        elif role == "assistant":
            append_turn(out, "assistant", _assistant_blocks(message, signed, searching))
        elif role == "tool":
            block = {"type": "tool_result", "tool_use_id": message["tool_call_id"],
                     "is_error": bool(message.get("is_error"))}
            if message.get("content"):
                block["content"] = message["content"]
            if message.get("images"):  # read_file on an image (tools/images.py)
                block["content"] = _image_blocks(message) + _user_blocks(message.get("content"))
            append_turn(out, "user", [block])
        else:
            raise ValueError(f"unsupported message role {role!r}")
    return out


def append_turn(out, role, blocks):
    """Add blocks as a turn, merging with a previous turn of the same role."""
    if not blocks:
        return
    if out and out[-1]["role"] == role:
        out[-1]["content"].extend(blocks)
    else:
        out.append({"role": role, "content": list(blocks)})


def _image_blocks(message):
    """A user message's images (turns/content.py) as base64 image blocks."""
    return [{"type": "image", "source": {"type": "base64", "media_type": image["mime_type"],
                                         "data": image["data"]}}
            for image in message.get("images") or ()]


def _user_blocks(content):
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content or ())


def _assistant_blocks(message, signed, searching=False):
    calls = message.get("tool_calls") or []
    kept = _kept(message)
    if searching and any(b.get("type") in SEARCH_BLOCKS for b in kept):
        blocks = [b for b in kept if signed or b.get("type") not in THINKING]
    else:
        blocks = [b for b in kept if b.get("type") in THINKING] if signed else []
        if message.get("content"):
            blocks.append({"type": "text", "text": message["content"]})
    for call in calls:
        blocks.append({"type": "tool_use", "id": call["id"], "name": call["name"],
                       "input": tool_input(call.get("arguments"))})
    return blocks


def _kept(message):
    """The answer's own blocks kept for later requests (its Replay)."""
    replay = message.get("replay")
    if isinstance(replay, dict) and replay.get("kind") == REPLAY_KIND:
        return [b for b in replay.get("items") or () if isinstance(b, dict)]
    return []


def _signed(message):
    return [b for b in _kept(message) if b.get("type") in THINKING]


def anthropic_tools(tools):
    return [{"name": t["name"], "description": t.get("description", ""),
             "input_schema": t.get("parameters") or {"type": "object", "properties": {}}}
            for t in tools]


def search_tool(request):
    """The web search server tool for this request, or None. A tool of our own (an MCP
    server's) named ``web_search`` wins: the API refuses two tools of one name."""
    option = request.web_search
    if not option:
        return None
    if any(t["name"] == "web_search" for t in request.tools):
        log.warning("web search not offered: a tool of this session is named web_search")
        return None
    tool = {"type": WEB_SEARCH_TOOL, "name": "web_search"}
    if option.get("max_uses"):
        tool["max_uses"] = option["max_uses"]
    return tool


def token_plan(request):
    """``(max_tokens, thinking budget or None)``; an explicit cap is never exceeded."""
    budget = THINKING_BUDGETS.get(request.effort)
    if not request.max_output_tokens:
        return DEFAULT_MAX_TOKENS + (budget or 0), budget
    max_tokens = request.max_output_tokens
    if budget and budget >= max_tokens:
        budget = max_tokens // 2
    return max_tokens, budget if budget and budget >= MIN_THINKING_BUDGET else None


def _awaits_unsigned_results(messages):
    """True when the latest assistant turn made tool calls without signed thinking."""
    for message in reversed(messages):
        if message["role"] == "assistant":
            return bool(message.get("tool_calls")) and not _signed(message)
    return False


def message_params(request, cache=None):
    """The request body; ``cache``: the ``cache_control`` value, None for no breakpoints."""
    max_tokens, budget = token_plan(request)
    if budget and _awaits_unsigned_results(request.messages):
        log.info("thinking off for this request: no signed thinking for the pending tool calls")
        budget = None
    search = search_tool(request)
    params = {"model": request.model, "max_tokens": max_tokens, "stream": True,
              "messages": anthropic_messages(request.messages, signed=bool(budget),
                                             searching=search is not None)}
    if request.system:
        params["system"] = [{"type": "text", "text": request.system}]
    if request.tools or search:
        params["tools"] = anthropic_tools(request.tools) + ([search] if search else [])
    if budget:
        params["thinking"] = {"type": "enabled", "budget_tokens": budget}
    if cache is not None:
        mark_breakpoints(params, cache)
    return params


def mark_breakpoints(params, cache):
    """Put ``cache`` on the tool list, the system prompt and the latest two user turns."""
    marked = []
    if params.get("tools"):
        marked.append((params["tools"], len(params["tools"]) - 1))
    if params.get("system"):
        marked.append((params["system"], 0))
    users = [m for m in params["messages"] if m["role"] == "user"][-2:]
    marked += [(m["content"], len(m["content"]) - 1) for m in users if m["content"]]
    for blocks, index in marked[-4:]:
        blocks[index] = dict(blocks[index], cache_control=cache)  # a copy: never the history's


# ---------------------------------------------------------------- the provider
class AnthropicProvider(Provider):
    name = "anthropic"
    web_search = True

    def __init__(self, name="anthropic", api_key=None, base_url=None, timeout=600.0,
                 max_retries=2, headers=None, connect_timeout=15.0, prompt_cache=True,
                 cache_ttl=None):
        self.name = name
        self.base_url, self._api_key, self._key_hint = resolve_credentials(
            name, "anthropic", api_key, base_url, "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")
        if cache_ttl not in (None, *CACHE_TTLS):
            raise ProviderNotConfigured(f"{name}: cache_ttl must be one of "
                                        f"{', '.join(CACHE_TTLS)}, not {cache_ttl!r}")
        self.cache = None
        if prompt_cache:
            self.cache = {"type": "ephemeral", **({"ttl": cache_ttl} if cache_ttl == "1h" else {})}
        extra = {"x-api-key": self._api_key, "anthropic-version": API_VERSION,
                 **(headers or {})}
        self._client = HTTPClient(self.base_url or DEFAULT_BASE_URL, extra, name,
                                  self._key_hint, self._api_key, connect_timeout=connect_timeout,
                                  read_timeout=timeout, max_retries=max_retries)

    def close(self):
        self._client.close()

    def list_models(self, timeout=10.0):
        """Model ids the server lists at ``/v1/models`` (the model config option)."""
        body = self._client.get_json("/v1/models?limit=1000", timeout)
        data = body.get("data") if isinstance(body, dict) else None
        return [m["id"] for m in data or () if isinstance(m, dict) and isinstance(m.get("id"), str)]

    def stream(self, request):
        return messages_stream(self._client, self.name, "/v1/messages",
                               message_params(request, self.cache))


def messages_stream(client, name, path, params):
    """The provider events of one streamed Messages request (also Vertex AI's
    ``streamRawPredict``, which streams the same events)."""
    state, response = MessageStreamState(), None
    try:
        response = yield from client.stream(path, params)
        for event in sse_json(client, response, name):
            if not isinstance(event, dict):
                raise MalformedResponse(f"{name}: malformed response from "
                                        f"{client.target.netloc}: not a JSON object")
            if event.get("type") == "error":
                raise client.status_error(200, event, "the server reported an error")
            yield from state.feed(event)
        yield from state.finish_events(name, state.tool_calls())
    finally:
        if response is not None:
            response.close()
