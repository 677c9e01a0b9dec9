"""Anthropic Messages provider (streaming, tools, extended thinking).

It speaks the streaming API through :mod:`term2acp.providers.http` (no SDK: retries,
proxies, TLS and timeouts live there) and decodes the SSE events here: text, thinking and
signature deltas, ``tool_use`` blocks with ``input_json`` deltas, usage, error events.

Extended thinking: when thinking is on, the API requires the assistant turn that made the
tool calls being answered to be resent with its signed thinking blocks. The neutral
history keeps thought text only, so the provider remembers the signed blocks of its own
recent tool-calling turns (keyed by the first tool call id) and re-attaches them; when
they are unknown (e.g. after a restart), thinking is switched off for that request.
"""

import collections
import json
import logging

from term2acp.providers.base import (
    Provider,
    ProviderError,
    Stop,
    TextDelta,
    ThoughtDelta,
    ToolCall,
    Usage,
)
from term2acp.providers.errors import MalformedResponse
from term2acp.providers.http import HTTPClient
from term2acp.providers.openai import resolve_credentials, sse_json

log = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS = 8192
MIN_THINKING_BUDGET = 1024
THINKING_BUDGETS = {"low": 1024, "medium": 4096, "high": 16384, "xhigh": 32000}
STOP_REASONS = {"end_turn": "end_turn", "stop_sequence": "end_turn", "pause_turn": "end_turn",
                "tool_use": "tool_use", "max_tokens": "max_tokens",
                "model_context_window_exceeded": "max_tokens", "refusal": "refusal"}
SIGNED_TURNS_KEPT = 256
DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"


# ---------------------------------------------------------------- request building
def anthropic_messages(messages, signed=None):
    """Neutral history -> Messages API turns; ``signed`` maps a call id to thinking blocks."""
    out = []
    for message in messages:
        role = message["role"]
        if role == "user":
            _append(out, "user", _image_blocks(message) + _user_blocks(message["content"]))
        elif role == "assistant":
            _append(out, "assistant", _assistant_blocks(message, signed or {}))
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
    """A user message's images (agent/content.py) as base64 image blocks."""
    return [{"type": "image", "source": {"type": "base64", "media_type": image["mime_type"],
                                         "data": image["data"]}}
            for image in message.get("images") or ()]


def _user_blocks(content):
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content or ())


def _assistant_blocks(message, signed):
    calls = message.get("tool_calls") or []
    blocks = list(signed.get(calls[0]["id"], ())) if calls else []
    if message.get("content"):
        blocks.append({"type": "text", "text": message["content"]})
    for call in calls:
        blocks.append({"type": "tool_use", "id": call["id"], "name": call["name"],
                       "input": _tool_input(call.get("arguments"))})
    return blocks


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


def _awaits_unsigned_results(messages, signed):
    """True when the latest assistant turn made tool calls we hold no signed thinking for."""
    for message in reversed(messages):
        if message["role"] == "assistant":
            calls = message.get("tool_calls") or []
            return bool(calls) and calls[0]["id"] not in signed
    return False


def message_params(request, signed):
    max_tokens, budget = token_plan(request)
    if budget and _awaits_unsigned_results(request.messages, signed):
        log.info("thinking off for this request: no signed thinking for the pending tool calls")
        budget = None
    params = {"model": request.model, "max_tokens": max_tokens, "stream": True,
              "messages": anthropic_messages(request.messages, signed if budget else None)}
    if request.system:
        params["system"] = request.system
    if request.tools:
        params["tools"] = anthropic_tools(request.tools)
    if budget:
        params["thinking"] = {"type": "enabled", "budget_tokens": budget}
    return params


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
        yield from calls
        if self.usage:
            yield self._usage_event()
        reason = STOP_REASONS.get(self.stop) or ("tool_use" if calls else "end_turn")
        yield Stop(reason)

    def _usage_event(self):
        """``input_tokens`` counts the whole prompt (cache reads and writes included), as
        OpenAI's ``prompt_tokens`` does; ``cached_tokens`` is the cache-read part."""
        count = {key: value or 0 for key, value in self.usage.items()}
        cached = count.get("cache_read_input_tokens", 0)
        prompt = count.get("input_tokens", 0) + cached + count.get("cache_creation_input_tokens", 0)
        return Usage(input_tokens=prompt, output_tokens=count.get("output_tokens", 0),
                     thought_tokens=count.get("thinking_tokens", 0), cached_tokens=cached)


# ---------------------------------------------------------------- the provider
class AnthropicProvider(Provider):
    name = "anthropic"

    def __init__(self, name="anthropic", api_key=None, base_url=None, timeout=600.0,
                 max_retries=2, headers=None, connect_timeout=15.0):
        self.name = name
        self.base_url, self._api_key, self._key_hint = resolve_credentials(
            name, "anthropic", api_key, base_url, "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")
        self._signed = collections.OrderedDict()  # first tool call id -> thinking blocks
        extra = {"x-api-key": self._api_key, "anthropic-version": API_VERSION,
                 **(headers or {})}
        self._client = HTTPClient(self.base_url or DEFAULT_BASE_URL, extra, name,
                                  self._key_hint, self._api_key, connect_timeout=connect_timeout,
                                  read_timeout=timeout, max_retries=max_retries)

    def stream(self, request):
        params = message_params(request, self._signed)
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
            calls = state.tool_calls()
            self._remember(calls, state.signed_thinking())
            yield from state.finish_events(self.name, calls)
        finally:
            if response is not None:
                response.close()

    def _remember(self, calls, thinking):
        if calls and thinking:
            self._signed[calls[0].call_id] = thinking
            while len(self._signed) > SIGNED_TURNS_KEPT:
                self._signed.popitem(last=False)
