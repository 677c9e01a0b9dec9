"""Google's ``generateContent`` format: request building and stream decoding.

Shared by the Gemini API (``gemini.py``) and Vertex AI's Gemini models (``vertex.py``),
which speak the same body and the same ``streamGenerateContent?alt=sse`` stream.

Request: ``contents`` (turns of role ``user`` or ``model``, each a list of ``parts``),
``systemInstruction``, ``tools`` (one ``functionDeclarations`` list; each declaration's
``parametersJsonSchema`` carries our JSON Schema unchanged), ``generationConfig``
(``maxOutputTokens``; ``thinkingConfig`` from the effort, thoughts included so they can be
shown). A tool result is a ``functionResponse`` part in a user turn, named after the call.

Thought signatures: a model that thinks signs parts of its answer (``thoughtSignature``
on a function call, sometimes on a text part). They must come back, as received, with
those parts in later requests, or the model loses its reasoning (Gemini 3 refuses a
function call of the current turn without its signature). The answer's parts, signatures
included, are kept with the assistant message as a :class:`Replay` of kind ``gemini``
and sent in its place; thought summaries (``thought: true`` parts) are shown as thoughts
and not kept.

Stream: each SSE event is a ``GenerateContentResponse``: ``candidates[0].content.parts``
(text, thought text, ``functionCall``), ``candidates[0].finishReason``, and
``usageMetadata`` (``promptTokenCount`` with ``cachedContentTokenCount`` inside it,
``candidatesTokenCount``, ``thoughtsTokenCount``); a blocked prompt has
``promptFeedback.blockReason`` and no candidate.
"""

import json
import logging
import uuid

from term2acp.providers.base import ProviderError, Replay, Stop, TextDelta, ThoughtDelta, \
    ToolCall, Usage
from term2acp.providers.errors import MalformedResponse

log = logging.getLogger(__name__)

REPLAY_KIND = "gemini"
# thinking tokens for an effort (0: off, where the model allows it)
THINKING_BUDGETS = {"none": 0, "minimal": 512, "low": 1024, "medium": 8192, "high": 24576,
                    "xhigh": 32768}
FINISH = {"STOP": "end_turn", "MAX_TOKENS": "max_tokens", "SAFETY": "refusal",
          "RECITATION": "refusal", "PROHIBITED_CONTENT": "refusal", "BLOCKLIST": "refusal",
          "SPII": "refusal", "IMAGE_SAFETY": "refusal", "LANGUAGE": "refusal"}
OUR_IDS = "gcall_"  # call ids we made up for calls the server gave none


# ---------------------------------------------------------------- request building
def contents(messages):
    """Neutral history -> ``contents``; consecutive turns of one role merge."""
    out, names = [], {}
    for message in messages:
        role = message["role"]
        if role == "user":
            _append(out, "user", _image_parts(message) + _text_parts(message.get("content")))
        elif role == "assistant":
            parts = _model_parts(message)
            for call in message.get("tool_calls") or ():
                names[call["id"]] = call["name"]
            _append(out, "model", parts)
        elif role == "tool":
            _append(out, "user", [_function_response(message, names)] + _image_parts(message))
        else:
            raise ValueError(f"unsupported message role {role!r}")
    return out


def _append(out, role, parts):
    if not parts:
        return
    if out and out[-1]["role"] == role:
        out[-1]["parts"].extend(parts)
    else:
        out.append({"role": role, "parts": list(parts)})


def _text_parts(content):
    return [{"text": content}] if isinstance(content, str) and content else []


def _image_parts(message):
    return [{"inlineData": {"mimeType": image["mime_type"], "data": image["data"]}}
            for image in message.get("images") or ()]


def _model_parts(message):
    """The answer's own parts (with their signatures) when it came from a Gemini model;
    else text and calls rebuilt from the neutral message."""
    replay = message.get("replay")
    if isinstance(replay, dict) and replay.get("kind") == REPLAY_KIND:
        return [dict(p) for p in replay.get("items") or () if isinstance(p, dict)]
    parts = _text_parts(message.get("content"))
    for call in message.get("tool_calls") or ():
        parts.append({"functionCall": _call_body(call["id"], call["name"],
                                                 call.get("arguments"))})
    return parts


def _call_body(call_id, name, arguments):
    body = {"name": name, "args": _arguments(arguments)}
    if call_id and not call_id.startswith(OUR_IDS):
        body["id"] = call_id
    return body


def _arguments(text):
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _function_response(message, names):
    call_id = message["tool_call_id"]
    key = "error" if message.get("is_error") else "result"
    body = {"name": message.get("name") or names.get(call_id) or "tool",
            "response": {key: message.get("content") or ""}}
    if call_id and not call_id.startswith(OUR_IDS):
        body["id"] = call_id
    return {"functionResponse": body}


def declarations(tools):
    return [{"name": t["name"], "description": t.get("description", ""),
             "parametersJsonSchema": t.get("parameters") or {"type": "object",
                                                              "properties": {}}}
            for t in tools]


def thinking_config(effort):
    config = {"includeThoughts": True}
    if effort in THINKING_BUDGETS:
        config["thinkingBudget"] = THINKING_BUDGETS[effort]
    elif effort not in (None, "default"):
        log.warning("unknown effort %r ignored", effort)
    if config.get("thinkingBudget") == 0:
        config.pop("includeThoughts")
    return config


def prefix(request):
    """What never changes in a session: the system instruction and the tool list."""
    body = {}
    if request.system:
        body["systemInstruction"] = {"parts": [{"text": request.system}]}
    if request.tools:
        body["tools"] = [{"functionDeclarations": declarations(request.tools)}]
    return body


def generation_config(request):
    config = {"thinkingConfig": thinking_config(request.effort)}
    if request.max_output_tokens:
        config["maxOutputTokens"] = request.max_output_tokens
    return config


def request_body(request):
    """The whole ``generateContent`` body (the prefix first, so its bytes stay the same
    from request to request and the server's implicit cache finds it)."""
    body = prefix(request)
    body["contents"] = contents(request.messages)
    body["generationConfig"] = generation_config(request)
    return body


# ---------------------------------------------------------------- stream decoding
class StreamState:
    """Accumulates one streamed answer; ``feed`` yields provider events."""

    def __init__(self, name):
        self.name = name
        self.parts = []  # the answer's parts to keep (text merged, calls, signatures)
        self.calls = []  # ToolCall
        self.finish = None
        self.usage = None
        self.blocked = None
        self.received = False

    def feed(self, chunk):
        if not isinstance(chunk, dict):
            raise MalformedResponse(f"{self.name}: malformed response: not a JSON object")
        self.received = True
        if isinstance(chunk.get("usageMetadata"), dict):
            self.usage = chunk["usageMetadata"]
        feedback = chunk.get("promptFeedback")
        if isinstance(feedback, dict) and feedback.get("blockReason"):
            self.blocked = str(feedback["blockReason"])
        for candidate in (chunk.get("candidates") or ())[:1]:
            if not isinstance(candidate, dict):
                continue
            content = candidate.get("content") or {}
            for part in content.get("parts") or ():
                if isinstance(part, dict):
                    yield from self._part(part)
            if candidate.get("finishReason"):
                self.finish = candidate["finishReason"]

    def _part(self, part):
        signature = part.get("thoughtSignature")
        if part.get("thought"):
            if isinstance(part.get("text"), str) and part["text"]:
                yield ThoughtDelta(part["text"])
            if signature:  # a signature on a thought part: kept on an empty text part
                self.parts.append({"text": "", "thoughtSignature": signature})
            return
        call = part.get("functionCall")
        if isinstance(call, dict):
            call_id = call.get("id") or f"{OUR_IDS}{uuid.uuid4().hex[:12]}"
            name = call.get("name") or ""
            kept = {"functionCall": _call_body(call_id, name, json.dumps(call.get("args") or {}))}
            if signature:
                kept["thoughtSignature"] = signature
            self.parts.append(kept)
            self.calls.append(ToolCall(call_id, name, json.dumps(call.get("args") or {})))
            return
        text = part.get("text")
        if isinstance(text, str):
            if text:
                yield TextDelta(text)
            last = self.parts[-1] if self.parts else None
            if last is not None and set(last) <= {"text"} and not signature:
                last["text"] += text
            elif text or signature:
                self.parts.append({"text": text, **({"thoughtSignature": signature}
                                                    if signature else {})})

    def finish_events(self):
        if not self.received:
            raise ProviderError(f"{self.name}: the server sent an empty response")
        if self.finish == "MALFORMED_FUNCTION_CALL":
            raise ProviderError(f"{self.name}: the model produced a malformed function call")
        yield from self.calls
        if any("thoughtSignature" in p or "functionCall" in p for p in self.parts):
            yield Replay(REPLAY_KIND, self.parts)
        if self.usage is not None:
            yield usage(self.usage)
        yield Stop(self._reason())

    def _reason(self):
        if self.blocked:
            return "refusal"
        if self.calls:
            return "tool_use"
        if self.finish is None:
            log.warning("%s: stream ended without a finish reason", self.name)
            return "end_turn"
        return FINISH.get(self.finish, "end_turn")


def usage(meta):
    thoughts = _count(meta.get("thoughtsTokenCount"))
    return Usage(input_tokens=_count(meta.get("promptTokenCount"))
                 + _count(meta.get("toolUsePromptTokenCount")),
                 output_tokens=_count(meta.get("candidatesTokenCount")) + thoughts,
                 thought_tokens=thoughts,
                 cached_tokens=_count(meta.get("cachedContentTokenCount")))


def _count(value):
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
