"""Anthropic's streamed Messages events as provider events (``anthropic.py`` sends the
request): text, thinking and signature deltas, ``tool_use`` blocks with ``input_json``
deltas, web searches (``server_tool_use`` and ``web_search_tool_result`` blocks, see
``anthropic.py``), citations, usage and the stop reason. What later requests must send
back (signed thinking; an answer's search blocks with its text) ends the stream as a
:class:`~term2acp.providers.base.Replay`.
"""

import json

from term2acp.providers.base import (
    ProviderError,
    Replay,
    Stop,
    TextDelta,
    ThoughtDelta,
    ToolCall,
    Usage,
    WebSearch,
    token_count,
)

STOP_REASONS = {"end_turn": "end_turn", "stop_sequence": "end_turn", "pause_turn": "pause",
                "tool_use": "tool_use", "max_tokens": "max_tokens",
                "model_context_window_exceeded": "max_tokens", "refusal": "refusal"}
REPLAY_KIND = "anthropic"
SEARCH_BLOCKS = ("server_tool_use", "web_search_tool_result")


def tool_input(arguments):
    """A tool_use block's input from the JSON text of its arguments (the model's malformed
    text is kept under ``_raw_arguments``)."""
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {"_raw_arguments": arguments}


class MessageStreamState:
    """Accumulates one streamed message and turns its events (dicts) into provider events."""

    def __init__(self):
        # index -> dict: type, id, name, json, thinking, signature, data, text, citations;
        # a web_search_tool_result's whole block in "block"
        self.blocks = {}
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
        elif kind == "content_block_stop":
            slot = self.blocks.get(event.get("index"))
            if slot is not None and slot["type"] == "server_tool_use":
                yield self._search_started(slot)
        elif kind == "message_start":
            self._usage((event.get("message") or {}).get("usage"))
        elif kind == "message_delta":
            self.stop = (event.get("delta") or {}).get("stop_reason") or self.stop
            self._usage(event.get("usage"))

    def _start(self, index, block):
        kind = block.get("type")
        self.blocks[index] = slot = {"type": kind, "json": "", "thinking": "", "signature": "",
                                     "text": "", "citations": list(block.get("citations") or ())}
        if kind in ("tool_use", "server_tool_use"):
            slot.update(id=block.get("id") or "", name=block.get("name") or "")
            if kind == "server_tool_use":
                given = block.get("input")
                slot["input"] = given if isinstance(given, dict) else {}
                yield self._search_started(slot)
        elif kind == "web_search_tool_result":
            slot["block"] = block
            yield search_result(block)
        elif kind == "redacted_thinking":
            slot["data"] = block.get("data")
        elif kind == "text" and block.get("text"):
            slot["text"] = block["text"]
            yield TextDelta(block["text"])
        elif kind == "thinking" and block.get("thinking"):
            slot["thinking"] = block["thinking"]
            yield ThoughtDelta(block["thinking"])

    def _delta(self, slot, delta):
        kind = delta.get("type")
        if kind == "text_delta":
            slot["text"] = slot.get("text", "") + (delta.get("text") or "")
            yield TextDelta(delta.get("text") or "")
        elif kind == "citations_delta":
            if isinstance(delta.get("citation"), dict):
                slot.setdefault("citations", []).append(delta["citation"])
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
        server = usage.get("server_tool_use")
        if isinstance(server, dict) and server.get("web_search_requests") is not None:
            self.usage["web_search_requests"] = server["web_search_requests"]

    @staticmethod
    def _search_started(slot):
        """The search a ``server_tool_use`` block asks for: at its start, and again at
        its stop, when its input (the query) is whole."""
        if slot["json"]:
            slot["input"] = tool_input(slot["json"])
        query = slot.get("input", {}).get("query")
        action = {"type": "search", "query": query} if isinstance(query, str) else None
        return WebSearch(slot["id"], "in_progress", action)

    def tool_calls(self):
        return [ToolCall(b["id"], b["name"], b["json"] or "{}")
                for _, b in sorted(self.blocks.items()) if b["type"] == "tool_use"]

    def kept_blocks(self):
        """The blocks later requests send back: signed thinking; and when the answer
        searched, its text and search blocks too, all in stream order."""
        searched = any(b["type"] in SEARCH_BLOCKS for b in self.blocks.values())
        blocks = []
        for _, b in sorted(self.blocks.items(), key=lambda item: (item[0] is None, item[0] or 0)):
            kind = b["type"]
            if kind == "thinking" and b["signature"]:
                blocks.append({"type": "thinking", "thinking": b["thinking"],
                               "signature": b["signature"]})
            elif kind == "redacted_thinking":
                blocks.append({"type": "redacted_thinking", "data": b["data"]})
            elif not searched:
                continue
            elif kind == "text" and b["text"]:  # the API refuses empty text blocks
                text = {"type": "text", "text": b["text"]}
                if b["citations"]:
                    text["citations"] = b["citations"]
                blocks.append(text)
            elif kind == "server_tool_use":
                blocks.append({"type": kind, "id": b["id"], "name": b["name"],
                               "input": tool_input(b["json"]) if b["json"] else b["input"]})
            elif kind == "web_search_tool_result":
                blocks.append(b["block"])
        return blocks

    def finish_events(self, name, calls):
        if self.stop is None:
            raise ProviderError(f"{name}: the stream ended before the model finished")
        kept = self.kept_blocks()
        if kept:
            yield Replay(REPLAY_KIND, kept)
        yield from calls
        if self.usage:
            yield self._usage_event()
        reason = STOP_REASONS.get(self.stop) or ("tool_use" if calls else "end_turn")
        yield Stop(reason)

    def _usage_event(self):
        """``input_tokens`` counts the whole prompt (cache reads and writes included), as
        OpenAI's ``prompt_tokens`` does; ``cached_tokens`` is the cache-read part,
        ``cache_write_tokens`` the part written to the cache."""
        count = {key: token_count(value, key) for key, value in self.usage.items()}
        cached = count.get("cache_read_input_tokens", 0)
        written = count.get("cache_creation_input_tokens", 0)
        prompt = count.get("input_tokens", 0) + cached + written
        return Usage(input_tokens=prompt, output_tokens=count.get("output_tokens", 0),
                     thought_tokens=count.get("thinking_tokens", 0), cached_tokens=cached,
                     cache_write_tokens=written,
                     web_searches=count.get("web_search_requests", 0))


def search_result(block):
    """A ``web_search_tool_result`` block as the WebSearch event that settles it."""
    content = block.get("content")
    search_id = block.get("tool_use_id") or ""
    if isinstance(content, list):
        results = [{"url": r.get("url") or "", "title": r.get("title") or ""}
                   for r in content if isinstance(r, dict) and r.get("type") == "web_search_result"]
        return WebSearch(search_id, "completed", results=results)
    code = content.get("error_code") if isinstance(content, dict) else None
    return WebSearch(search_id, "failed", error=code or "unknown error")
