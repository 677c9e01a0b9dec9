"""A faithful fake of Bedrock's Converse stream: AWS's event-stream framing and SigV4.

:func:`message` encodes one event-stream message as the AWS documentation describes it
(a prelude of total and header lengths with its CRC32, string-typed headers, the JSON
payload, the message's CRC32), written here from that description: the agent decodes it
with botocore's parser, so the two sides are independent. :func:`verify` checks a recorded
request's ``Authorization`` header by computing the SigV4 signature again from the
request as it arrived (canonical request, string to sign, the derived key), as the
service does; :class:`Bedrock` is the responder that refuses a request whose signature
does not match (403, as Bedrock does) and otherwise plays its script.
"""

import collections
import hashlib
import hmac
import json
import struct
import zlib
from urllib.parse import quote, unquote

from tests.support.fake_llm import Raw, Status

EVENT_STREAM = "application/vnd.amazon.eventstream"


def _header(name, value):
    raw_name, raw_value = name.encode(), value.encode()
    return struct.pack("B", len(raw_name)) + raw_name + b"\x07" + \
        struct.pack(">H", len(raw_value)) + raw_value


def message(event_type, payload, message_type="event"):
    headers = _header(":event-type" if message_type == "event" else ":exception-type",
                      event_type) + _header(":content-type", "application/json") + \
        _header(":message-type", message_type)
    body = json.dumps(payload).encode()
    total = 12 + len(headers) + len(body) + 4
    prelude = struct.pack(">II", total, len(headers))
    head = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers + body
    return head + struct.pack(">I", zlib.crc32(head))


def stream(*events, split=7):
    """A Raw reply of the events (``(type, payload)``), cut into chunks of odd sizes so a
    message crosses chunk boundaries."""
    data = b"".join(message(kind, payload) for kind, payload in events)
    return Raw([data[i:i + split * 97] for i in range(0, len(data), split * 97)], EVENT_STREAM)


def text_turn(text, usage, stop="end_turn"):
    return [("messageStart", {"role": "assistant"}),
            ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": text}}),
            ("contentBlockStop", {"contentBlockIndex": 0}),
            ("messageStop", {"stopReason": stop}), ("metadata", {"usage": usage, "metrics":
                                                                 {"latencyMs": 12}})]


def tool_turn(call_id, name, args, usage, reasoning=None, signature=None):
    events = [("messageStart", {"role": "assistant"})]
    index = 0
    if reasoning:
        events += [("contentBlockDelta", {"contentBlockIndex": 0, "delta": {
            "reasoningContent": {"text": reasoning}}}),
            ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {
                "reasoningContent": {"signature": signature}}}),
            ("contentBlockStop", {"contentBlockIndex": 0})]
        index = 1
    text = json.dumps(args)
    events += [("contentBlockStart", {"contentBlockIndex": index, "start": {
        "toolUse": {"toolUseId": call_id, "name": name}}}),
        ("contentBlockDelta", {"contentBlockIndex": index, "delta": {"toolUse": {
            "input": text[:5]}}}),
        ("contentBlockDelta", {"contentBlockIndex": index, "delta": {"toolUse": {
            "input": text[5:]}}}),
        ("contentBlockStop", {"contentBlockIndex": index}),
        ("messageStop", {"stopReason": "tool_use"}),
        ("metadata", {"usage": usage})]
    return events


def usage(fresh, output, read=0, write=0):
    return {"inputTokens": fresh, "outputTokens": output, "totalTokens": fresh + output + read
            + write, "cacheReadInputTokens": read, "cacheWriteInputTokens": write}


def _sign(key, text):
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def verify(request, secret, region, service="bedrock"):
    """None when the request's SigV4 signature is right, else what is wrong."""
    auth = request.headers.get("authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return "no SigV4 Authorization header"
    fields = dict(part.strip().split("=", 1) for part in auth[17:].split(","))
    access, date, where, svc, _end = fields["Credential"].split("/")
    if (where, svc) != (region, service):
        return f"signed for {where}/{svc}"
    signed = fields["SignedHeaders"].split(";")
    path, _, query = request.path.partition("?")
    # every path segment encoded once more (all services but S3)
    canonical_path = "/".join(quote(segment, safe="-_.~") for segment in path.split("/"))
    pairs = sorted((quote(unquote(k), safe="-_.~"), quote(unquote(v), safe="-_.~"))
                   for k, _, v in (p.partition("=") for p in query.split("&") if p))
    canonical = "\n".join([
        request.method, canonical_path, "&".join(f"{k}={v}" for k, v in pairs),
        "".join(f"{name}:{' '.join(request.headers[name].split())}\n" for name in signed),
        ";".join(signed), hashlib.sha256(request.body).hexdigest()])
    stamp = request.headers["x-amz-date"]
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, f"{date}/{region}/{service}/aws4_request",
                         hashlib.sha256(canonical.encode()).hexdigest()])
    key = _sign(("AWS4" + secret).encode(), date)
    for part in (region, service, "aws4_request"):
        key = _sign(key, part)
    expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, fields["Signature"]):
        return "signature mismatch"
    return None


class Bedrock:
    """The responder: checks the signature, then answers from ``script``."""

    def __init__(self, secret, region):
        self.secret, self.region = secret, region
        self.script = collections.deque()
        self.refused = []

    def __call__(self, request):
        problem = verify(request, self.secret, self.region)
        if problem:
            self.refused.append(problem)
            return Status(403, {"message": "The request signature we calculated does not "
                                           "match the signature you provided."})
        if not self.script:
            return Status(400, {"message": "fake Bedrock: no scripted response left"})
        return self.script.popleft()
