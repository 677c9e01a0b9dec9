"""OpenAI Responses API streams for the fake model server (``/v1/responses``).

The events follow the public API reference: ``response.created`` and
``response.in_progress``, then per output item ``response.output_item.added``, its deltas
(``response.reasoning_summary_part.added`` / ``response.reasoning_summary_text.delta``
for a reasoning item's summary, ``response.content_part.added`` /
``response.output_text.delta`` for a message, ``response.function_call_arguments.delta``
/ ``.done`` for a function call) and ``response.output_item.done`` with the whole item,
and a closing ``response.completed`` (``response.incomplete``, ``response.failed``) whose
``response.usage`` counts the tokens. Every event has a ``sequence_number``; there is no
``[DONE]``. A reasoning item's ``encrypted_content`` is only sent when the request asked
for it (``include: ["reasoning.encrypted_content"]``).

:class:`Reasoner` checks what a stateless (``store: false``) conversation must carry: a
function call's output must follow the call, and the encrypted reasoning the server gave
before a call must come back in front of it, unchanged (the real server decrypts it; a
changed or missing one loses the model's reasoning).
"""

import hashlib
import json

from tests.support.fake_llm import SSE, Status


class Stream:
    """Builds one response's events; :meth:`sse` makes the :class:`SSE` reply."""

    def __init__(self, model="fake-model", response_id="resp_fake"):
        self.events = []
        self.output = []
        self.response = {"id": response_id, "object": "response", "model": model,
                         "status": "in_progress", "output": [], "usage": None, "error": None,
                         "incomplete_details": None}
        self._emit("response.created", response=dict(self.response))
        self._emit("response.in_progress", response=dict(self.response))

    def _emit(self, kind, **fields):
        self.events.append({"type": kind, "sequence_number": len(self.events), **fields})

    def _added(self, item):
        index = len(self.output)
        self.output.append(item)
        self._emit("response.output_item.added", output_index=index, item=item)
        return index

    def reasoning(self, *summary, encrypted=None):
        item_id = f"rs_{len(self.output)}"
        index = self._added({"type": "reasoning", "id": item_id, "summary": []})
        for number, text in enumerate(summary):
            part = {"type": "summary_text", "text": ""}
            self._emit("response.reasoning_summary_part.added", item_id=item_id,
                       output_index=index, summary_index=number, part=part)
            self._emit("response.reasoning_summary_text.delta", item_id=item_id,
                       output_index=index, summary_index=number, delta=text)
            self._emit("response.reasoning_summary_text.done", item_id=item_id,
                       output_index=index, summary_index=number, text=text)
        item = {"type": "reasoning", "id": item_id,
                "summary": [{"type": "summary_text", "text": t} for t in summary]}
        if encrypted is not None:
            item["encrypted_content"] = encrypted
        self.output[index] = item
        self._emit("response.output_item.done", output_index=index, item=item)
        return self

    def text(self, *parts, refusal=False):
        item_id = f"msg_{len(self.output)}"
        index = self._added({"type": "message", "id": item_id, "role": "assistant",
                             "status": "in_progress", "content": []})
        kind = "refusal" if refusal else "output_text"
        self._emit("response.content_part.added", item_id=item_id, output_index=index,
                   content_index=0, part={"type": kind, "text": ""} if not refusal
                   else {"type": kind, "refusal": ""})
        for part in parts:
            self._emit(f"response.{kind}.delta", item_id=item_id, output_index=index,
                       content_index=0, delta=part)
        whole = "".join(parts)
        content = {"type": "refusal", "refusal": whole} if refusal else \
            {"type": "output_text", "text": whole, "annotations": []}
        item = {"type": "message", "id": item_id, "role": "assistant", "status": "completed",
                "content": [content]}
        self.output[index] = item
        self._emit("response.output_item.done", output_index=index, item=item)
        return self

    def call(self, call_id, name, *argument_parts):
        item_id = f"fc_{len(self.output)}"
        index = self._added({"type": "function_call", "id": item_id, "call_id": call_id,
                             "name": name, "arguments": "", "status": "in_progress"})
        for part in argument_parts:
            self._emit("response.function_call_arguments.delta", item_id=item_id,
                       output_index=index, delta=part)
        arguments = "".join(argument_parts)
        self._emit("response.function_call_arguments.done", item_id=item_id,
                   output_index=index, arguments=arguments)
        item = {"type": "function_call", "id": item_id, "call_id": call_id, "name": name,
                "arguments": arguments, "status": "completed"}
        self.output[index] = item
        self._emit("response.output_item.done", output_index=index, item=item)
        return self

    def search(self, query, sources=(), status="completed"):
        """A ``web_search_call`` item: added in progress, its three progress events, done
        with its ``action`` (``sources`` as URLs; the server sends them only when the
        request asked: ``include: ["web_search_call.action.sources"]``)."""
        item_id = f"ws_{len(self.output)}"
        index = self._added({"type": "web_search_call", "id": item_id, "status": "in_progress"})
        for step in ("in_progress", "searching", "completed"):
            self._emit(f"response.web_search_call.{step}", output_index=index, item_id=item_id)
        action = {"type": "search", "query": query}
        if sources is not None:
            action["sources"] = [{"type": "url", "url": url} for url in sources]
        item = {"type": "web_search_call", "id": item_id, "status": status, "action": action}
        self.output[index] = item
        self._emit("response.output_item.done", output_index=index, item=item)
        return self

    def end(self, input_tokens=10, output_tokens=5, cached=0, reasoning=0, status="completed",
            reason=None, error=None):
        usage = {"input_tokens": input_tokens,
                 "input_tokens_details": {"cached_tokens": cached},
                 "output_tokens": output_tokens,
                 "output_tokens_details": {"reasoning_tokens": reasoning},
                 "total_tokens": input_tokens + output_tokens}
        response = dict(self.response, status=status, output=list(self.output),
                        usage=None if status == "failed" else usage)
        if reason:
            response["incomplete_details"] = {"reason": reason}
        if error:
            response["error"] = error
        self._emit(f"response.{status}", response=response)
        return self

    def sse(self, **options):
        return SSE([(event["type"], event) for event in self.events], kind="responses", **options)


def error_event(message, code="server_error"):
    return SSE([("error", {"type": "error", "code": code, "message": message, "param": None,
                           "sequence_number": 0})], kind="responses")


def encrypted_for(text):
    return "enc-" + hashlib.sha256(text.encode()).hexdigest()


class Reasoner:
    """Server-side rules of a stateless conversation (see the module docstring)."""

    def __init__(self):
        self.issued = {}  # call id -> encrypted reasoning given before that call

    def remember(self, call_id, encrypted):
        self.issued[call_id] = encrypted

    def check(self, body):
        """The error a real server would answer the request with, or None."""
        items = body.get("input") or []
        seen_calls = set()
        for number, item in enumerate(items):
            kind = item.get("type")
            if kind == "function_call":
                seen_calls.add(item.get("call_id"))
                if "id" in item and body.get("store") is False:
                    return f"Item with id '{item['id']}' not found. Items are not persisted " \
                           "when `store` is set to false."
                expected = self.issued.get(item.get("call_id"))
                if expected is not None:
                    before = [i for i in items[:number] if i.get("type") == "reasoning"]
                    if not before or before[-1].get("encrypted_content") != expected:
                        return f"input[{number}]: the reasoning item required before " \
                               f"function call {item.get('call_id')} is missing or changed"
            elif kind == "web_search_call" and "id" in item and body.get("store") is False:
                return f"Item with id '{item['id']}' not found. Items are not persisted " \
                       "when `store` is set to false."
            elif kind == "function_call_output" and item.get("call_id") not in seen_calls:
                return f"No tool call found for function call output with call_id " \
                       f"{item.get('call_id')}."
        return None


def refuse(message):
    return Status(400, {"error": {"message": message, "type": "invalid_request_error",
                                  "param": "input", "code": None}})


def scenario_answer(model, body, row, text, calls):
    """The answer of :class:`tests.support.scenario.ScenarioModel` on ``/v1/responses``."""
    reasoner = getattr(model, "reasoner", None)
    if reasoner is None:
        reasoner = model.reasoner = Reasoner()
    problem = reasoner.check(body)
    if problem:
        model.refused.append((row.number, problem))
        return refuse(problem)
    stream = Stream(model=body.get("model", "fake-model"))
    wants = "reasoning.encrypted_content" in (body.get("include") or ())
    thought = f"Thinking about request {row.number}."
    encrypted = encrypted_for(thought) if wants else None
    if body.get("reasoning"):
        stream.reasoning(thought, encrypted=encrypted)
    stream.text(text)
    for call_id, name, args in calls or ():
        stream.call(call_id, name, args)
        if encrypted:
            reasoner.remember(call_id, encrypted)
    total = row.read + row.written + row.uncached
    return stream.end(total, 20, cached=row.read).sse()


def body_json(request):
    return json.loads(request.body)
