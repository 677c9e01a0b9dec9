"""The slash commands a session's MCP servers bring: each server prompt, and sign-in.

* ``/<server>:<prompt>``: the prompt's description, its argument names as the hint. The
  words typed fill the arguments in order (the last one takes the rest); ``name=value``
  fills one by name. ``prompts/get``'s messages become the user's turn (their text, the
  text of embedded resources; other content is described).
* ``/mcp-login <server>`` starts a new sign-in; ``/mcp-logout <server>`` deletes its token
  file (offered when some server signs in over HTTP).

A command is runtime-neutral: ``run(argument)`` returns ``("say", text)`` (shown to the
user) or ``("prompt", text)`` (the user's turn); ``turns/commands.py`` wraps it. Prompt
lists are read after the handshake and again on ``notifications/prompts/list_changed``.
"""

import logging
import shlex

from term2acp.mcp.naming import reduce
from term2acp.mcp.rpc import McpError, plain

log = logging.getLogger(__name__)

LIST_TIMEOUT = 10.0
GET_TIMEOUT = 30.0
MAX_PROMPTS = 200  # per server
DESCRIPTION_CAP = 200
TEXT_CAP = 200_000  # of a prompt's messages


class HostedCommand:
    def __init__(self, name, description, hint, run, in_history=True):
        self.name, self.description, self.hint, self.run = name, description, hint, run
        self.in_history = in_history  # sign-in is the user's business, not the model's


def list_prompts(client):
    """The server's prompts (dicts with a name), at most MAX_PROMPTS; [] without prompts."""
    if "prompts" not in client.capabilities:
        return []
    out, cursor = [], None
    for _ in range(10):
        result = client.connection.request("prompts/list", {"cursor": cursor} if cursor else None,
                                           timeout=LIST_TIMEOUT)
        if not isinstance(result, dict):
            break
        out.extend(p for p in result.get("prompts") or () if isinstance(p, dict)
                   and isinstance(p.get("name"), str) and p["name"].strip())
        cursor = result.get("nextCursor")
        if not cursor or len(out) >= MAX_PROMPTS:
            break
    return out[:MAX_PROMPTS]


def fill(arguments, text):
    """``name=value`` words by name, the others in order; the last argument takes the rest."""
    names = [a["name"] for a in arguments]
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    given, loose = {}, []
    for word in words:
        key, eq, value = word.partition("=")
        if eq and key in names:
            given[key] = value
        else:
            loose.append(word)
    free = [n for n in names if n not in given]
    for index, name in enumerate(free):
        if not loose:
            break
        given[name] = " ".join(loose) if index == len(free) - 1 else loose.pop(0)
        if index == len(free) - 1:
            loose = []
    return given, [a["name"] for a in arguments if a.get("required") and a["name"] not in given]


def messages_text(result):
    """A ``GetPromptResult``'s messages as the text of the user's turn."""
    parts = []
    for message in result.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else None
        blocks = content if isinstance(content, list) else [content]
        for block in blocks:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                parts.append(str(block.get("text") or ""))
            elif block.get("type") == "resource" and isinstance(block.get("resource"), dict):
                resource = block["resource"]
                parts.append(f"[resource {resource.get('uri') or ''}]\n{resource.get('text') or ''}")
            else:
                parts.append(f"[{block.get('type') or 'unknown'} content]")
    return "\n\n".join(p for p in parts if p)[:TEXT_CAP]


def prompt_command(hub, client, short, prompt):
    arguments = [a for a in prompt.get("arguments") or () if isinstance(a, dict)
                 and isinstance(a.get("name"), str)]
    hint = " ".join(a["name"] if a.get("required") else f"[{a['name']}]" for a in arguments) or None
    description = plain(str(prompt.get("description") or prompt.get("title") or
                            f"The {prompt['name']} prompt"), DESCRIPTION_CAP)

    def run(text):
        values, missing = fill(arguments, text)
        if missing:
            return "say", f"/{short}:{reduce(prompt['name'], 'prompt')} needs " \
                          f"{', '.join(missing)} (usage: its arguments in order, or name=value)."
        if not client.alive:
            return "say", f"The MCP server {client.name!r} is not available: {client.why_not()}"
        try:
            result = client.connection.request("prompts/get", {"name": prompt["name"],
                                                               "arguments": values},
                                               timeout=GET_TIMEOUT)
        except McpError as exc:
            return "say", f"The MCP server {client.name!r} could not give the prompt: " \
                          f"{client.config.redact(str(exc))}"
        text = messages_text(result if isinstance(result, dict) else {})
        return ("prompt", text) if text else ("say", "The prompt has no text.")
    return HostedCommand(f"{short}:{reduce(prompt['name'], 'prompt')[:64]}", description, hint, run)


def account_commands(hub):
    def pick(text, action):
        name = text.strip()
        client = hub.client(name)
        if client is None:
            names = ", ".join(c.name for c in hub.clients if c.credentials is not None)
            return "say", f"Usage: /mcp-{action} <server> (one of: {names})."
        if action == "login":
            return "say", hub.login(client)
        return "say", hub.accounts.logout(client)
    return [HostedCommand("mcp-login", "Sign in to a remote MCP server (opens a sign-in URL)",
                          "server", lambda text: pick(text, "login"), in_history=False),
            HostedCommand("mcp-logout", "Sign out of a remote MCP server (deletes its token)",
                          "server", lambda text: pick(text, "logout"), in_history=False)]
