"""Amazon Bedrock's Converse API: request building and stream decoding.

Request (``POST /model/{modelId}/converse-stream``): ``messages`` (turns of role ``user``
or ``assistant``, each a list of content blocks: ``text``, ``image``, ``toolUse``,
``toolResult``, ``reasoningContent``), ``system`` (text blocks), ``toolConfig.tools``
(``toolSpec`` with ``inputSchema.json``), ``inferenceConfig.maxTokens``; thinking for the
models that have it through ``additionalModelRequestFields.thinking`` (Anthropic's
field, passed through).

Prompt caching, for Anthropic models: ``cachePoint`` blocks, at most four, where the
Anthropic provider puts its breakpoints: after the tool list, after the system prompt and
at the end of the latest two user turns (``anthropic.py``).

Reasoning: a model's ``reasoningContent`` blocks (text with its ``signature``, or
``redactedContent``) are kept with the assistant message (a :class:`Replay` of kind
``bedrock``) and sent back, unchanged and first, with that message's tool calls.

The stream is AWS's binary event stream (``application/vnd.amazon.eventstream``): each
message has headers (``:message-type`` event or exception, ``:event-type``) and a JSON
payload; botocore's parser checks both CRCs of every message. Events: ``messageStart``,
``contentBlockStart`` (a ``toolUse``'s id and name), ``contentBlockDelta`` (``text``,
``toolUse.input`` JSON text, ``reasoningContent`` text / signature / redacted bytes),
``contentBlockStop``, ``messageStop`` (``stopReason``) and ``metadata`` (``usage``:
``inputTokens`` besides ``cacheReadInputTokens`` and ``cacheWriteInputTokens``).
"""

import base64
import json

from term2acp.providers.anthropic import THINKING_BUDGETS, append_turn, token_plan
from term2acp.providers.anthropic_stream import tool_input
from term2acp.providers.base import Replay, Stop, TextDelta, ThoughtDelta, ToolCall, Usage
from term2acp.providers.errors import ProviderError

REPLAY_KIND = "bedrock"
CACHE_POINT = {"cachePoint": {"type": "default"}}
STOPS = {"end_turn": "end_turn", "tool_use": "tool_use", "max_tokens": "max_tokens",
         "stop_sequence": "end_turn", "guardrail_intervened": "refusal",
         "content_filtered": "refusal", "model_context_window_exceeded": "max_tokens"}
IMAGE_FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif",
                 "image/webp": "webp"}


def anthropic_model(model):
    return "anthropic." in model or model.startswith("claude")


# ---------------------------------------------------------------- request building
def converse_body(request, cache=True):
    anthropic = anthropic_model(request.model)
    max_tokens, budget = token_plan(request) if anthropic else (request.max_output_tokens, None)
    if budget and _awaits_unsigned(request.messages):
        budget = None  # the pending calls were made without signed reasoning
    body = {"messages": messages(request.messages, signed=bool(budget))}
    if request.system:
        body["system"] = [{"text": request.system}]
    if request.tools:
        body["toolConfig"] = {"tools": [{"toolSpec": {
            "name": t["name"], "description": t.get("description") or t["name"],
            "inputSchema": {"json": t.get("parameters") or {"type": "object",
                                                            "properties": {}}}}}
            for t in request.tools]}
    if max_tokens:
        body["inferenceConfig"] = {"maxTokens": max_tokens}
    if budget:
        body["additionalModelRequestFields"] = {"thinking": {"type": "enabled",
                                                             "budget_tokens": budget}}
    if cache and anthropic:
        cache_points(body)
    return body


def cache_points(body):
    """At most four ``cachePoint`` blocks: tools, system, the latest two user turns."""
    marked = []
    if body.get("toolConfig"):
        marked.append(body["toolConfig"]["tools"])
    if body.get("system"):
        marked.append(body["system"])
    marked += [m["content"] for m in body["messages"] if m["role"] == "user"][-2:]
    for blocks in marked[-4:]:
        blocks.append(dict(CACHE_POINT))


def messages(history, signed):
    out = []
    for message in history:
        role = message["role"]
        if role == "user":
            append_turn(out, "user", _images(message) + _text(message.get("content")))
        elif role == "assistant":
            append_turn(out, "assistant", _assistant(message, signed))
        elif role == "tool":
            content = _text(message.get("content")) or [{"text": "(no output)"}]
            content += _images(message)
            append_turn(out, "user", [{"toolResult": {
                "toolUseId": message["tool_call_id"], "content": content,
                "status": "error" if message.get("is_error") else "success"}}])
        else:
            raise ValueError(f"unsupported message role {role!r}")
    return out


def _text(content):
    return [{"text": content}] if isinstance(content, str) and content.strip() else []


def _images(message):
    out = []
    for image in message.get("images") or ():
        kind = IMAGE_FORMATS.get(image.get("mime_type"))
        if kind:
            out.append({"image": {"format": kind, "source": {"bytes": image["data"]}}})
    return out


def _kept(message):
    replay = message.get("replay")
    if isinstance(replay, dict) and replay.get("kind") == REPLAY_KIND:
        return [b for b in replay.get("items") or () if isinstance(b, dict)]
    return []


def _assistant(message, signed):
    blocks = [dict(b) for b in _kept(message)] if signed else []
    blocks += _text(message.get("content"))
    for call in message.get("tool_calls") or ():
        blocks.append({"toolUse": {"toolUseId": call["id"], "name": call["name"],
                                   "input": tool_input(call.get("arguments"))}})
    return blocks


def _awaits_unsigned(history):
    for message in reversed(history):
        if message["role"] == "assistant":
            return bool(message.get("tool_calls")) and not _kept(message)
    return False


def thinking_for(model, effort):
    return anthropic_model(model) and effort in THINKING_BUDGETS


# ---------------------------------------------------------------- stream decoding
class StreamState:
    def __init__(self, name):
        self.name = name
        self.calls = {}  # block index -> [id, name, input text]
        self.reasoning = {}  # block index -> {"text", "signature"} or {"redacted"}
        self.stop = None
        self.usage = None

    def feed(self, kind, event):
        if kind == "contentBlockStart":
            start = (event.get("start") or {}).get("toolUse")
            if isinstance(start, dict):
                self.calls[event.get("contentBlockIndex")] = [start.get("toolUseId") or "",
                                                              start.get("name") or "", ""]
        elif kind == "contentBlockDelta":
            yield from self._delta(event.get("contentBlockIndex"), event.get("delta") or {})
        elif kind == "messageStop":
            self.stop = event.get("stopReason")
        elif kind == "metadata":
            self.usage = event.get("usage") or self.usage

    def _delta(self, index, delta):
        if isinstance(delta.get("text"), str) and delta["text"]:
            yield TextDelta(delta["text"])
        use = delta.get("toolUse")
        if isinstance(use, dict):
            slot = self.calls.setdefault(index, ["", "", ""])
            slot[2] += use.get("input") or ""
        thought = delta.get("reasoningContent")
        if isinstance(thought, dict):
            kept = self.reasoning.setdefault(index, {})
            if isinstance(thought.get("text"), str):
                kept["text"] = kept.get("text", "") + thought["text"]
                if thought["text"]:
                    yield ThoughtDelta(thought["text"])
            if isinstance(thought.get("signature"), str):
                kept["signature"] = thought["signature"]
            if thought.get("redactedContent"):
                kept["redacted"] = thought["redactedContent"]

    def finish_events(self):
        if self.stop is None:
            raise ProviderError(f"{self.name}: the stream ended before the model finished")
        for index in sorted(self.calls, key=lambda i: i or 0):
            call_id, name, arguments = self.calls[index]
            yield ToolCall(call_id, name, arguments or "{}")
        kept = [_reasoning_block(self.reasoning[i]) for i in sorted(self.reasoning)]
        if kept:
            yield Replay(REPLAY_KIND, kept)
        if self.usage is not None:
            yield usage(self.usage)
        reason = STOPS.get(self.stop, "end_turn")
        yield Stop("tool_use" if self.calls and reason == "end_turn" else reason)


def _reasoning_block(kept):
    if "redacted" in kept:
        data = kept["redacted"]
        if isinstance(data, (bytes, bytearray)):
            data = base64.b64encode(data).decode()
        return {"reasoningContent": {"redactedContent": data}}
    text = {"text": kept.get("text", "")}
    if kept.get("signature"):
        text["signature"] = kept["signature"]
    return {"reasoningContent": {"reasoningText": text}}


def usage(meta):
    read = _count(meta.get("cacheReadInputTokens"))
    written = _count(meta.get("cacheWriteInputTokens"))
    return Usage(input_tokens=_count(meta.get("inputTokens")) + read + written,
                 output_tokens=_count(meta.get("outputTokens")), cached_tokens=read,
                 cache_write_tokens=written)


def _count(value):
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def payload(message):
    """The JSON payload of one event-stream message (a dict)."""
    try:
        value = json.loads(message.payload or b"{}")
    except ValueError as exc:
        raise ProviderError(f"malformed event payload: {exc}") from None
    return value if isinstance(value, dict) else {}
