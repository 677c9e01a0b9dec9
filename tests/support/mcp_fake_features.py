"""What mcp_fake.py serves with ``MCP_FAKE_FEATURES=1`` (the shapes of the 2025-11-25 spec,
as the official SDKs send them):

* tools ``report`` (text, ``structuredContent`` that the text does not repeat, and a
  ``resource_link``), ``ask`` (an ``elicitation/create`` form to the client during the call;
  the result is the client's answer as JSON), ``sample`` (a ``sampling/createMessage`` to
  the client; the result is its error or answer), ``more_prompts`` (adds the prompt
  ``later`` and sends ``notifications/prompts/list_changed``);
* resources: ``memo://notes`` (text) and the template ``memo://notes/{topic}``;
* prompts: ``review`` (arguments ``file`` required and ``focus`` optional).

``MCP_FAKE_VERSIONS`` (comma separated) limits the protocol versions the fake speaks: it
answers the last of them to any other, and refuses a later request whose
MCP-Protocol-Version header is missing or not one of them.
"""

import itertools
import json
import os
import threading
import urllib.parse

RESOURCES = [{"uri": "memo://notes", "name": "notes", "title": "Team notes",
              "mimeType": "text/plain", "description": "What the team wrote down."}]
TEMPLATES = [{"uriTemplate": "memo://notes/{topic}", "name": "note by topic",
              "mimeType": "text/plain", "description": "One topic's note."}]
PROMPTS = [{"name": "review", "description": "Review a file with a focus.",
            "arguments": [{"name": "file", "description": "the file", "required": True},
                          {"name": "focus", "description": "what to look at"}]}]
_ids = itertools.count(1)


def enabled():
    return bool(os.environ.get("MCP_FAKE_FEATURES"))


def install(server, tool_class):
    server.prompts = list(PROMPTS)
    server.waiting = {}  # our request id -> [Event, answer]
    server.tools += [
        tool_class("report", "A report with structured content and a link.", _report,
                   returns=list),
        tool_class("ask", "Ask the user a question (elicitation).",
                   lambda a, c: _ask(server, c), returns=None),
        tool_class("sample", "Ask the client's model (sampling).",
                   lambda a, c: _sample(server, c), returns=None),
        tool_class("more_prompts", "Add the prompt 'later' and announce it.",
                   lambda a, c: _more_prompts(server, c), returns=None)]


def _report(args, ctx):
    return {"content": [{"type": "text", "text": "report ready"},
                        {"type": "resource_link", "uri": "memo://notes/q3", "name": "q3",
                         "mimeType": "text/plain", "description": "The Q3 note."}],
            "structuredContent": {"revenue": 42, "currency": "EUR"}}


def request(server, ctx, method, params, timeout=60):
    """Send a request to the client during a call and wait for its answer message."""
    rid = f"srv-{next(_ids)}"
    slot = server.waiting[rid] = [threading.Event(), None]
    ctx.request({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
    if not slot[0].wait(timeout):
        return {"error": {"message": "no answer"}}
    return slot[1]


def answered(server, message):
    """A client's response to one of our requests: True when it was one."""
    slot = getattr(server, "waiting", {}).pop(message.get("id"), None)
    if slot is None:
        return False
    slot[1] = message
    slot[0].set()
    return True


def _ask(server, ctx):
    answer = request(server, ctx, "elicitation/create", {
        "mode": "form", "message": "Which colour?",
        "requestedSchema": {"type": "object", "properties": {
            "colour": {"type": "string", "title": "Colour", "enum": ["red", "blue"]}},
            "required": ["colour"]}})
    return "answer: " + json.dumps(answer.get("result", answer.get("error")), sort_keys=True)


def _sample(server, ctx):
    answer = request(server, ctx, "sampling/createMessage", {
        "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
        "maxTokens": 10})
    if "error" in answer:
        return f"sampling refused: {answer['error'].get('code')} {answer['error'].get('message')}"
    return "sampling answered"


def _more_prompts(server, ctx):
    if not any(p["name"] == "later" for p in server.prompts):
        server.prompts.append({"name": "later", "description": "Added later."})
    ctx.notify({"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"})
    return "more prompts"


def handle(server, method, params):
    """The result of a resources/* or prompts/* request, or None for another method."""
    if method == "resources/list":
        return {"resources": RESOURCES}
    if method == "resources/templates/list":
        return {"resourceTemplates": TEMPLATES}
    if method == "resources/read":
        uri = params.get("uri") or ""
        if uri == "memo://notes":
            text = "notes: ship on Friday"
        elif uri.startswith("memo://notes/"):
            text = f"note about {urllib.parse.unquote(uri.rsplit('/', 1)[1])}"
        else:
            raise LookupError(f"Resource not found: {uri}")
        return {"contents": [{"uri": uri, "mimeType": "text/plain", "text": text}]}
    if method == "prompts/list":
        return {"prompts": server.prompts}
    if method == "prompts/get":
        name, args = params.get("name"), params.get("arguments") or {}
        if name == "review":
            if "file" not in args:
                raise LookupError("Missing required argument: file")
            text = f"Please review {args['file']}" + (f", focus on {args['focus']}"
                                                       if args.get("focus") else "") + "."
        elif name == "later" and any(p["name"] == "later" for p in server.prompts):
            text = "The later prompt."
        else:
            raise LookupError(f"Unknown prompt: {name}")
        return {"description": "", "messages": [
            {"role": "user", "content": {"type": "text", "text": text}}]}
    return None


def versions(default):
    given = os.environ.get("MCP_FAKE_VERSIONS")
    return tuple(given.split(",")) if given else default
