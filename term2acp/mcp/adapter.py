"""An MCP server tool as one of our tools: named, described, approved, run, mapped.

Approval: the first call of each server tool asks (``approvals.MCP_TOOL``: allow once,
allow this tool for the session, reject); "allow this tool for the session" becomes a
session grant keyed by (server, tool) that ends when the session closes.

Results: MCP ``content`` becomes the text the model sees (images, audio and resources are
described, with their URI where they have one) and one display item per block; an
``isError`` result, an error answer, a timeout or a dead server is a failed call with the
server's message, never an exception out of the turn.
"""

import base64
import binascii
import json
import re

from term2acp.core import approvals, elicitation
from term2acp.core.approvals import ApprovalRequest
from term2acp.core.text import one_line
from term2acp.mcp.naming import clean_schema
from term2acp.mcp.oauth import SignInNeeded
from term2acp.mcp.rpc import McpError, RequestTimeout, ServerGone
from term2acp.tools.base import Tool, ToolError, ToolResult

DESCRIPTION_CAP = 4000
STRUCTURED_CAP = 100_000
DISPLAY_CAP = 16_000  # what the editor is shown of a result, like our own tools (turn.py)
NAME_CAP = 64  # a server's or tool's name in a title
LABEL_CAP = 80  # a tool's own title in a title
_UNSHOWN_TEXT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]+")


def grant_key(config, tool):
    """What an allow-tool-session grant covers: one tool of one configured server. The
    config compares by what it starts or reaches (name, command, args, URL), so a server
    configured later under the same name (a resume with another command) is not covered."""
    return ("mcp", config, tool)


class McpTool(Tool):
    kind = "other"

    def __init__(self, hub, client, name, definition):
        self.hub = hub
        self.client = client
        self.name = name
        self.server = client.name
        self.tool = definition["name"]
        self.definition = definition
        annotations = definition.get("annotations") if isinstance(definition.get("annotations"), dict) else {}
        self.read_only = annotations.get("readOnlyHint") is True
        # turns/modes.py keys on kind: read-only mode offers only tools the server annotates
        # readOnlyHint (a hint, so they still ask on first use); ask mode asks for the others.
        self.kind = "read" if self.read_only else "other"
        # What titles show: the server's and tool's names first, each bounded, then the
        # tool's own title (the server's words) when it says more, bounded and on one line.
        self.label = f"{one_line(self.tool, NAME_CAP)} ({one_line(self.server, NAME_CAP)})"
        own = one_line(definition.get("title") or annotations.get("title") or "", LABEL_CAP)
        self.display = own if own and own != one_line(self.tool, NAME_CAP) else ""
        description = _UNSHOWN_TEXT.sub(" ", str(definition.get("description") or
                                                 f"{self.display or self.tool} (MCP tool)"))
        self.description = f"{description[:DESCRIPTION_CAP]}\n(MCP server: {self.server})"
        self._spec = {"name": name, "description": self.description,
                      "parameters": clean_schema(definition.get("inputSchema"))}

    @property
    def grant(self):
        return grant_key(self.client.config, self.tool)

    def spec(self):
        return self._spec

    def load(self, arguments):
        """The server validates its own arguments; we only insist on an object."""
        if arguments is None:
            return {}
        if not isinstance(arguments, dict):
            raise ToolError(f"{self.name} arguments must be a JSON object")
        return arguments

    def title(self, args):
        return f"{self.label}: {self.display}" if self.display else self.label

    def approval(self, args, ctx):
        if ctx.access.can_use_tool(self.grant):
            return None
        title = f"Run {one_line(self.tool, NAME_CAP)} from the MCP server {one_line(self.server, NAME_CAP)}"
        return ApprovalRequest(variant=approvals.MCP_TOOL, grant=self.grant,
                               title=f"{title}: {self.display}" if self.display else title)

    def run(self, args, ctx):
        client = self.client
        if not client.alive:
            raise ToolError(f"The MCP server {self.server} is not available: {client.why_not()}")
        client.calls.append(ctx)  # a question the server asks meanwhile goes through ctx
        try:
            result = client.call_tool(self.tool, args, timeout=self.hub.call_timeout)
        except ServerGone as exc:
            raise ToolError(f"The MCP server {self.server} stopped during the call: "
                            f"{client.config.redact(str(exc))}") from None
        except RequestTimeout:
            raise ToolError(f"The MCP server {self.server} did not answer within "
                            f"{self.hub.call_timeout:g} s, so the call was cancelled (the limit "
                            "is call_timeout in the [mcp] section of the agent's config "
                            "file).") from None
        except SignInNeeded as exc:
            client.challenge = exc.challenge
            raise ToolError(f"The MCP server {self.server} refused the call because the sign-in "
                            "has expired or was revoked: the user must sign in again with "
                            f"/mcp-login {self.server}") from None
        except McpError as exc:  # masked: a server may echo a header or env value back
            raise ToolError(f"The MCP server {self.server} refused the call: "
                            f"{client.config.redact(str(exc))}") from None
        finally:
            client.calls.remove(ctx)
        return to_result(result)


def elicit(client, params):
    """A server's ``elicitation/create`` (form): asked through the editor in the tool call
    that is running on that server (the latest), the answer returned as it came; declined
    without asking anyone when there is no such call or the editor takes no forms."""
    if not isinstance(params, dict) or not isinstance(params.get("message"), str) or \
            not isinstance(params.get("requestedSchema"), dict):
        raise McpError("elicitation/create needs a message and a requestedSchema", -32602)
    if params.get("mode", elicitation.FORM) != elicitation.FORM:
        return {"action": "decline"}  # only form elicitation is declared
    ctx = client.calls[-1] if client.calls else None
    if ctx is None or not ctx.elicits(elicitation.FORM):
        return {"action": "decline"}
    answer = ctx.elicit(elicitation.Elicitation(elicitation.FORM, params["message"],
                                                schema=params["requestedSchema"]))
    if answer.accepted:
        return {"action": answer.action, "content": answer.content or {}}
    return {"action": answer.action}


def to_result(result):
    """A ``CallToolResult`` dict -> ToolResult (text for the model, items for the editor)."""
    parts = []
    for block in result.get("content") or []:
        text = _block_text(block)
        if text:
            parts.append(text)
    structured = result.get("structuredContent")
    try:
        dumped = json.dumps(structured, ensure_ascii=False) if structured is not None else ""
    except (ValueError, RecursionError):  # nested past what can be written back
        structured, dumped = None, ""
    shown = list(parts)  # what the editor is shown: the blocks (the structured JSON alone)
    if dumped and not any(_same_json(part, structured) for part in parts):
        # The model gets the structured result too, unless a text block already is it
        # (the spec asks servers to send it as text as well).
        if parts:
            parts.append("[structured content] " + dumped[:STRUCTURED_CAP])
        else:
            parts.append(dumped[:STRUCTURED_CAP])
            shown = list(parts)
    text = "\n".join(parts)
    items, room = [], DISPLAY_CAP
    for part in shown:
        if room <= 0:
            break
        items.append({"type": "text", "text": part[:room]})
        room -= len(part)
    is_error = result.get("isError") is True
    if not text:
        text = "The tool failed without a message." if is_error else "(no output)"
    small = isinstance(structured, dict) and len(dumped) <= DISPLAY_CAP and _shallow(structured)
    return ToolResult(text, is_error=is_error, content=items, raw_output=structured if small else None)


def _same_json(text, value):
    """True when a text block already says ``value``: its JSON, or, for the SDKs' wrapped
    plain results (``{"result": x}``), ``x`` itself."""
    if isinstance(value, dict) and list(value) == ["result"]:
        if text == value["result"]:
            return True
        value = value["result"] if not isinstance(value["result"], str) else value
    try:
        return json.loads(text) == value
    except (ValueError, RecursionError):
        return False


def _shallow(value, room=32):
    """True when ``value`` nests at most ``room`` levels (what goes on to the editor)."""
    if room < 0:
        return False
    if isinstance(value, dict):
        return all(_shallow(v, room - 1) for v in value.values())
    if isinstance(value, list):
        return all(_shallow(v, room - 1) for v in value)
    return True


def _block_text(block):
    if not isinstance(block, dict):
        return ""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text") or "")
    if kind in ("image", "audio"):
        return f"[{kind} {block.get('mimeType') or 'of unknown type'}, {_size(block.get('data'))}]"
    if kind == "resource_link":
        name = block.get("title") or block.get("name") or ""
        about = [f"{block['mimeType']}" if isinstance(block.get("mimeType"), str) else "",
                 f"{block['size']} bytes" if isinstance(block.get("size"), int) else ""]
        about = ", ".join(a for a in about if a)
        text = f"[resource link] {name} {block.get('uri') or ''}".replace("  ", " ").strip()
        text += f" ({about})" if about else ""
        if isinstance(block.get("description"), str) and block["description"]:
            text += f": {block['description'][:DESCRIPTION_CAP]}"
        return text
    if kind == "resource":
        resource = block.get("resource") if isinstance(block.get("resource"), dict) else {}
        if isinstance(resource.get("text"), str):
            return f"[resource {resource.get('uri') or ''}]\n{resource['text']}"
        return f"[resource {resource.get('uri') or ''} {resource.get('mimeType') or ''}, " \
               f"{_size(resource.get('blob'))}]"
    return f"[{kind or 'unknown'} content]"


def _size(data):
    if not isinstance(data, str):
        return "no data"
    try:
        return f"{len(base64.b64decode(data, validate=False))} bytes"
    except (binascii.Error, ValueError):
        return f"{len(data)} base64 characters"
