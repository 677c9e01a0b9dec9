"""A model server's script for sub-agent tests: each request is answered by who sent it
(the parent, or the child whose task starts with a given word) and how far it got (the
assistant messages in the request), so children running side by side get their own
answers whatever order their requests arrive in."""

import json

import gevent
from gevent.event import Event

from tests.support import fake_llm as f

TASK = "# Task\n"  # what a child's first user message has before its task (turns/agents/child.py)


def texts(body):
    """Every user message's text of a chat or Anthropic request body."""
    out = []
    for message in body.get("messages") or ():
        if message.get("role") == "user":
            out.append(_text(message))
    return out


def child_of(body):
    """The first word of the task of a child's request, or None (the parent's)."""
    for text in texts(body):
        if TASK in text:
            return text.split(TASK, 1)[1].split()[0]
    return None


def rounds(body):
    """The assistant messages since the prompt (the last user message that is not a
    context note): how far this turn got."""
    count = 0
    for message in body.get("messages") or ():
        if message.get("role") == "assistant":
            count += 1
        elif message.get("role") == "user" and not _text(message).startswith("<context>") \
                and not _results(message):
            count = 0
    return count


def _results(message):
    """An Anthropic user message carrying tool results."""
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(p, dict) and p.get("type") == "tool_result" for p in content)


def _text(message):
    content = message.get("content")
    if isinstance(content, list):
        content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


class Router:
    """``server.responder``: ``script[who][round]`` is a response or a factory of one
    (``who``: None for the parent, else the child's task word). ``together``: task words
    whose first requests each wait (bounded) until all of them have arrived, and record
    whether they did (``met``)."""

    def __init__(self, script, together=(), wait=5.0):
        self.script = script
        self.seen = []  # (who, round, body)
        self.arrived = {word: Event() for word in together}
        self.met = {}
        self.wait = wait

    def __call__(self, request):
        body = request.json
        who, step = child_of(body), rounds(body)
        self.seen.append((who, step, body))
        if who in self.arrived and step == 0:
            self.arrived[who].set()
            with gevent.Timeout(self.wait, False):
                for event in self.arrived.values():
                    event.wait()
            self.met[who] = all(e.is_set() for e in self.arrived.values())
        replies = self.script.get(who) or ()
        if step >= len(replies):
            return f.Status(400, {"error": {"message": f"no reply for {who} round {step}"}})
        reply = replies[step]
        return reply() if callable(reply) else reply

    def first(self, who):
        return next(body for w, s, body in self.seen if w == who and s == 0)


def agent_call(index, call_id, prompt, kind=None, isolation=None, description="look"):
    args = {"description": description, "prompt": prompt}
    if kind:
        args["kind"] = kind
    if isolation:
        args["isolation"] = isolation
    return f.oa_tool(index, call_id, "agent", json.dumps(args))


def calls(*tools):
    """A factory of one OpenAI answer calling ``tools`` (oa_tool chunks)."""
    return lambda: f.openai_sse(*tools, f.oa_finish("tool_calls"))


def says(text, usage=None):
    chunks = [f.oa_text(text), f.oa_finish("stop")] + ([usage] if usage else [])
    return lambda: f.openai_sse(*chunks)


def tool(name, call_id="c_1", **args):
    return f.oa_tool(0, call_id, name, json.dumps(args))


def child_updates(updates, parent):
    return [u for u in updates if u.get("sessionUpdate") in ("tool_call", "tool_call_update")
            and (u.get("_meta") or {}).get("term2", {}).get("parentToolCallId") == parent]


def tool_updates(updates):
    return [u for u in updates if u.get("sessionUpdate") in ("tool_call", "tool_call_update")]
