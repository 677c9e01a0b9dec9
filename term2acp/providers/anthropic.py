"""Anthropic Messages provider (streaming, tools, extended thinking).

It speaks the streaming API through :mod:`term2acp.providers.http` (no SDK: retries,
proxies, TLS and timeouts live there) and decodes the SSE events here: text, thinking and
signature deltas, ``tool_use`` blocks with ``input_json`` deltas, usage, error events.

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
"""

import json
import logging

from term2acp.providers.base import (
    Provider,
    ProviderError,
    Replay,
    Stop,
    TextDelta,
    ThoughtDelta,
    ToolCall,
    Usage,
)
from term2acp.providers.errors import MalformedResponse, ProviderNotConfigured
from term2acp.providers.http import HTTPClient
from term2acp.providers.openai import resolve_credentials, sse_json

log = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS = 8192
MIN_THINKING_BUDGET = 1024
THINKING_BUDGETS = {"low": 1024, "medium": 4096, "high": 16384, "xhigh": 32000}
STOP_REASONS = {"end_turn": "end_turn", "stop_sequence": "end_turn", "pause_turn": "end_turn",
                "tool_use": "tool_use", "max_tokens": "max_tokens",
                "model_context_window_exceeded": "max_tokens", "refusal": "refusal"}
REPLAY_KIND = "anthropic"
CACHE_TTLS = ("5m", "1h")
DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"


# ---------------------------------------------------------------- request building
def anthropic_messages(messages, signed=False):
    """Neutral history -> Messages API turns; ``signed``: with the stored thinking blocks."""
    out = []
    for message in messages:
        role = message["role"]
        if role == "user":
            _append(out, "user", _image_blocks(message) + _user_blocks(message["content"]))
        elif role == "assistant":
            _append(out, "assistant", _assistant_blocks(message, signed))
        elif role == "tool":
            block = {"type": "tool_result", "tool_use_id": message["tool_call_id"],
                     "is_error": bool(message.get("is_error"))}
            if message.get("content"):
                block["content"] = message["content"]
            if message.get("images"):  # read_file on an image (tools/images.py)
                block["content"] = _image_blocks(message) + _user_blocks(message.get("content"))
            _append(out, "user", [block])
        else:
            raise ValueError(f"unsupported message role {role!r}")
    return out


def _append(out, role, blocks):
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


def _assistant_blocks(message, signed):
    calls = message.get("tool_calls") or []
    blocks = list(_signed(message)) if signed else []
    if message.get("content"):
        blocks.append({"type": "text", "text": message["content"]})
    for call in calls:
        blocks.append({"type": "tool_use", "id": call["id"], "name": call["name"],
                       "input": _tool_input(call.get("arguments"))})
    return blocks


def _signed(message):
    replay = message.get("replay")
    if isinstance(replay, dict) and replay.get("kind") == REPLAY_KIND:
        return [b for b in replay.get("items") or () if isinstance(b, dict)]
    return []


def _tool_input(arguments):
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {"_raw_arguments": arguments}


def anthropic_tools(tools):
    return [{"name": t["name"], "description": t.get("description", ""),
             "input_schema": t.get("parameters") or {"type": "object", "properties": {}}}
            for t in tools]


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
    params = {"model": request.model, "max_tokens": max_tokens, "stream": True,
              "messages": anthropic_messages(request.messages, signed=bool(budget))}
    if request.system:
        params["system"] = [{"type": "text", "text": request.system}]
    if request.tools:
        params["tools"] = anthropic_tools(request.tools)
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


# ---------------------------------------------------------------- stream decoding
class MessageStreamState:
    """Accumulates one streamed message and turns its events (dicts) into provider events."""

    def __init__(self):
        self.blocks = {}  # index -> dict: type, id, name, json, thinking, signature, data
        self.stop = None
        self.usage = {}
        self.received = False

    def feed(self, event):
        self.received = True
        kind = event.get("type")
        if kind == "content_block_delta":
            yield from self._delta(self.blocks.setdefault(event.get("index"), {"type": "?"}),
                                   event.get("delta") or {})
        elif kind == "content_block_start":
            yield from self._start(event.get("index"), event.get("content_block") or {})
        elif kind == "message_start":
            self._usage((event.get("message") or {}).get("usage"))
        elif kind == "message_delta":
            self.stop = (event.get("delta") or {}).get("stop_reason") or self.stop
            self._usage(event.get("usage"))

    def _start(self, index, block):
        kind = block.get("type")
        self.blocks[index] = slot = {"type": kind, "json": "", "thinking": "", "signature": ""}
        if kind == "tool_use":
            slot.update(id=block.get("id") or "", name=block.get("name") or "")
        elif kind == "redacted_thinking":
            slot["data"] = block.get("data")
        elif kind == "text" and block.get("text"):
            yield TextDelta(block["text"])
        elif kind == "thinking" and block.get("thinking"):
            slot["thinking"] = block["thinking"]
            yield ThoughtDelta(block["thinking"])

    def _delta(self, slot, delta):
        kind = delta.get("type")
        if kind == "text_delta":
            yield TextDelta(delta.get("text") or "")
        elif kind == "thinking_delta":
            slot["thinking"] = slot.get("thinking", "") + (delta.get("thinking") or "")
            yield ThoughtDelta(delta.get("thinking") or "")
        elif kind == "signature_delta":
            slot["signature"] = slot.get("signature", "") + (delta.get("signature") or "")
        elif kind == "input_json_delta":
            slot["json"] = slot.get("json", "") + (delta.get("partial_json") or "")

    def _usage(self, usage):
        if not isinstance(usage, dict):
            return
        for key in ("input_tokens", "output_tokens", "cache_read_input_tokens",
                    "cache_creation_input_tokens"):
            if usage.get(key) is not None:
                self.usage[key] = usage[key]
        details = usage.get("output_tokens_details") or {}
        if details.get("thinking_tokens") is not None:
            self.usage["thinking_tokens"] = details["thinking_tokens"]

    def tool_calls(self):
        return [ToolCall(b["id"], b["name"], b["json"] or "{}")
                for _, b in sorted(self.blocks.items()) if b["type"] == "tool_use"]

    def signed_thinking(self):
        blocks = []
        for _, b in sorted(self.blocks.items()):
            if b["type"] == "thinking" and b["signature"]:
                blocks.append({"type": "thinking", "thinking": b["thinking"],
                               "signature": b["signature"]})
            elif b["type"] == "redacted_thinking":
                blocks.append({"type": "redacted_thinking", "data": b["data"]})
        return blocks

    def finish_events(self, name, calls):
        if self.stop is None:
            raise ProviderError(f"{name}: the stream ended before the model finished")
        thinking = self.signed_thinking()
        if thinking:
            yield Replay(REPLAY_KIND, thinking)
        yield from calls
        if self.usage:
            yield self._usage_event()
        reason = STOP_REASONS.get(self.stop) or ("tool_use" if calls else "end_turn")
        yield Stop(reason)

    def _usage_event(self):
        """``input_tokens`` counts the whole prompt (cache reads and writes included), as
        OpenAI's ``prompt_tokens`` does; ``cached_tokens`` is the cache-read part,
        ``cache_write_tokens`` the part written to the cache."""
        count = {key: value or 0 for key, value in self.usage.items()}
        cached = count.get("cache_read_input_tokens", 0)
        written = count.get("cache_creation_input_tokens", 0)
        prompt = count.get("input_tokens", 0) + cached + written
        return Usage(input_tokens=prompt, output_tokens=count.get("output_tokens", 0),
                     thought_tokens=count.get("thinking_tokens", 0), cached_tokens=cached,
                     cache_write_tokens=written)


# ---------------------------------------------------------------- the provider
class AnthropicProvider(Provider):
    name = "anthropic"

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

    def list_models(self, timeout=10.0):
        """Model ids the server lists at ``/v1/models`` (the model picker)."""
        body = self._client.get_json("/v1/models?limit=1000", timeout)
        data = body.get("data") if isinstance(body, dict) else None
        return [m["id"] for m in data or () if isinstance(m, dict) and isinstance(m.get("id"), str)]

    def stream(self, request):
        params = message_params(request, self.cache)
        client, state, response = self._client, MessageStreamState(), None
        try:
            response = yield from client.stream("/v1/messages", params)
            for event in sse_json(client, response, self.name):
                if not isinstance(event, dict):
                    raise MalformedResponse(f"{self.name}: malformed response from "
                                            f"{client.target.netloc}: not a JSON object")
                if event.get("type") == "error":
                    raise client.status_error(200, event, "the server reported an error")
                yield from state.feed(event)
            yield from state.finish_events(self.name, state.tool_calls())
        finally:
            if response is not None:
                response.close()
