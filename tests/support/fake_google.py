"""Gemini's ``streamGenerateContent?alt=sse`` stream for the fake model server.

Each event is one ``GenerateContentResponse``: ``candidates[0].content.parts`` (text,
thought summaries marked ``thought: true``, ``functionCall`` parts that may carry a
``thoughtSignature``), the candidate's ``finishReason`` on the last one, and
``usageMetadata`` (``promptTokenCount`` counting ``cachedContentTokenCount`` in it,
``candidatesTokenCount``, ``thoughtsTokenCount``), as the public API reference shows them.
"""

from tests.support.fake_llm import SSE, Status


def chunk(*parts, finish=None, usage=None):
    candidate = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    event = {"candidates": [candidate], "modelVersion": "gemini-2.5-flash"}
    if usage:
        event["usageMetadata"] = usage
    return event


def usage(prompt, candidates, thoughts=0, cached=0):
    meta = {"promptTokenCount": prompt, "candidatesTokenCount": candidates,
            "totalTokenCount": prompt + candidates + thoughts}
    if thoughts:
        meta["thoughtsTokenCount"] = thoughts
    if cached:
        meta["cachedContentTokenCount"] = cached
    return meta


def text(value, signature=None):
    part = {"text": value}
    if signature:
        part["thoughtSignature"] = signature
    return part


def thought(value):
    return {"text": value, "thought": True}


def call(name, args, signature=None, call_id=None):
    part = {"functionCall": {"name": name, "args": args}}
    if call_id:
        part["functionCall"]["id"] = call_id
    if signature:
        part["thoughtSignature"] = signature
    return part


def stream(*chunks, **options):
    return SSE([(None, c) for c in chunks], kind="gemini", **options)


def bad_key():
    """What the API answers a key it does not accept: HTTP 400, not 401."""
    return Status(400, {"error": {"code": 400, "message": "API key not valid. Please pass a "
                                  "valid API key.", "status": "INVALID_ARGUMENT", "details": [
        {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
         "domain": "googleapis.com"}]}})


def cache_entry(name="cachedContents/fake-cache-1", model="gemini-2.5-flash"):
    return Status(200, {"name": name, "model": f"models/{model}",
                        "expireTime": "2026-12-06T12:00:00Z",
                        "usageMetadata": {"totalTokenCount": 4096}})
