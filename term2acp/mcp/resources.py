"""MCP resources for the model: two tools, offered while some server has resources.

* ``mcp_list_resources`` lists each server's resources and resource templates (all
  servers, or the one named); no approval: it reads names, not contents.
* ``mcp_read_resource`` reads a URI from a server, or fills a template's ``{variables}``
  (RFC 6570's simple, reserved ``{+x}``, path ``{/x}`` and query ``{?x,y}`` forms) first.
  The first read from each server asks like an MCP tool call (allow once, allow for the
  session, reject); the contents are capped like other results (text, blobs described).
"""

import re
import urllib.parse

from term2acp.core import approvals
from term2acp.core.approvals import ApprovalRequest
from term2acp.mcp.adapter import DISPLAY_CAP, STRUCTURED_CAP, _size, one_line
from term2acp.mcp.rpc import McpError, RequestTimeout, ServerGone
from term2acp.tools.base import Tool, ToolError, ToolResult

LIST, READ = "mcp_list_resources", "mcp_read_resource"
MAX_LISTED = 200  # per server and kind
LIST_TIMEOUT = 15.0
LINE_CAP = 300
_VARIABLE = re.compile(r"\{([+#/?&]?)([A-Za-z0-9_.,%]+)\}")
_RESERVED = ":/?#[]@!$&'()*+,;="


def has_resources(client):
    return client.has_resources


def expand(template, values):
    """``template`` with its variables filled from ``values`` (strings)."""
    def one(match):
        op, names = match.group(1), match.group(2).split(",")
        given = [(n, str(values[n])) for n in names if values.get(n) is not None]
        if op in ("?", "&"):
            return (op + "&".join(f"{n}={urllib.parse.quote(v, safe='')}" for n, v in given)) \
                if given else ""
        safe = _RESERVED if op in ("+", "#") else ""
        parts = [urllib.parse.quote(v, safe=safe) for _, v in given]
        if op == "/":
            return "".join("/" + p for p in parts)
        return ("#" if op == "#" and parts else "") + ",".join(parts)
    return _VARIABLE.sub(one, template)


def _pages(client, method, key):
    out, cursor = [], None
    for _ in range(20):
        result = client.connection.request(method, {"cursor": cursor} if cursor else None,
                                           timeout=LIST_TIMEOUT)
        if not isinstance(result, dict):
            break
        out.extend(r for r in result.get(key) or () if isinstance(r, dict))
        cursor = result.get("nextCursor")
        if not cursor or len(out) >= MAX_LISTED:
            break
    return out[:MAX_LISTED]


def _line(entry, where):
    about = ", ".join(str(entry[k]) for k in ("mimeType",) if isinstance(entry.get(k), str))
    name = entry.get("title") or entry.get("name") or ""
    text = f"- {entry.get(where)} {name}" + (f" ({about})" if about else "")
    if isinstance(entry.get("description"), str):
        text += f": {entry['description']}"
    return one_line(text, LINE_CAP)


class _ResourceTool(Tool):
    kind = "read"
    server = ""  # not one server's tool: offered whatever [mcp] tools chooses
    client = None

    def __init__(self, hub):
        self.hub = hub
        self.tool = self.name

    def spec(self):
        return {"name": self.name, "description": self.description, "parameters": self.PARAMETERS}

    def _servers(self, name=None):
        found = [c for c in self.hub.clients if c.alive and has_resources(c)]
        if name:
            found = [c for c in found if c.name == name]
            if not found:
                names = ", ".join(c.name for c in self.hub.clients if has_resources(c))
                raise ToolError(f"No MCP server {name!r} with resources is running (servers "
                                f"with resources: {names or 'none'}).")
        return found

    def _ask(self, client, method, params):
        try:
            return client.connection.request(method, params, timeout=self.hub.call_timeout)
        except (ServerGone, RequestTimeout, McpError) as exc:
            raise ToolError(f"The MCP server {client.name} could not answer {method}: "
                            f"{client.config.redact(str(exc))}") from None


class ListResources(_ResourceTool):
    name = LIST
    description = ("List the resources (URIs with names and types) and resource templates "
                   "(URIs with {variables}) of the MCP servers, or of one server; read one "
                   f"with {READ}.")
    PARAMETERS = {"type": "object", "properties": {
        "server": {"type": "string", "description": "one server's name (default: all)"}}}

    def load(self, arguments):
        arguments = arguments or {}
        if not isinstance(arguments, dict) or not isinstance(arguments.get("server", ""), str):
            raise ToolError(f'{LIST} takes {{"server": "<name>"}} or nothing')
        return {"server": arguments.get("server") or None}

    def title(self, args):
        return f"List MCP resources{' of ' + one_line(args['server'], 64) if args['server'] else ''}"

    def approval(self, args, ctx):
        return None

    def run(self, args, ctx):
        lines = []
        for client in self._servers(args["server"]):
            resources = _pages(client, "resources/list", "resources")
            try:
                templates = _pages(client, "resources/templates/list", "resourceTemplates")
            except McpError:  # templates are optional
                templates = []
            lines.append(f"Server {client.name}: {len(resources)} resources, "
                         f"{len(templates)} templates")
            lines += [_line(r, "uri") for r in resources]
            lines += [_line(t, "uriTemplate") for t in templates]
        text = "\n".join(lines) or "No MCP server has resources."
        return ToolResult(text[:STRUCTURED_CAP], content=[{"type": "text", "text": text[:DISPLAY_CAP]}])


class ReadResource(_ResourceTool):
    name = READ
    description = ("Read a resource of an MCP server by its URI, or fill a resource "
                   "template's {variables} with `arguments` and read that URI. The first "
                   "read from each server asks the user.")
    PARAMETERS = {"type": "object", "required": ["server"], "properties": {
        "server": {"type": "string", "description": "the server's name"},
        "uri": {"type": "string", "description": "the resource's URI"},
        "template": {"type": "string", "description": "a URI template, instead of uri"},
        "arguments": {"type": "object", "additionalProperties": {"type": "string"},
                      "description": "the template's variables"}}}

    def load(self, arguments):
        a = arguments if isinstance(arguments, dict) else {}
        server, uri, template = a.get("server"), a.get("uri"), a.get("template")
        values = a.get("arguments") or {}
        if not isinstance(server, str) or not server or not isinstance(values, dict) or \
                not (isinstance(uri, str) and uri) and not (isinstance(template, str) and template):
            raise ToolError(f'{READ} takes {{"server", "uri"}} or {{"server", "template", '
                            '"arguments"}}')
        if not uri:
            uri = expand(template, {k: v for k, v in values.items() if isinstance(k, str)})
        return {"server": server, "uri": uri}

    def title(self, args):
        return f"Read {one_line(args['uri'], 120)} ({one_line(args['server'], 64)})"

    def approval(self, args, ctx):
        found = [c for c in self.hub.clients if c.name == args["server"]]
        if not found:
            return None  # run says which servers there are
        client = found[0]
        grant = ("mcp-resources", client.config)
        if ctx.access.can_use_tool(grant):
            return None
        return ApprovalRequest(variant=approvals.MCP_TOOL, grant=grant, title=(
            f"Read {one_line(args['uri'], 120)} from the MCP server {one_line(client.name, 64)}"))

    def run(self, args, ctx):
        (client,) = self._servers(args["server"])
        result = self._ask(client, "resources/read", {"uri": args["uri"]})
        parts = []
        for item in (result or {}).get("contents") or () if isinstance(result, dict) else ():
            if not isinstance(item, dict):
                continue
            if isinstance(item.get("text"), str):
                parts.append(f"[{item.get('uri') or args['uri']}]\n{item['text']}")
            else:
                parts.append(f"[{item.get('uri') or args['uri']} {item.get('mimeType') or ''}, "
                             f"{_size(item.get('blob'))}]")
        text = "\n\n".join(parts) or "(the resource is empty)"
        return ToolResult(text[:STRUCTURED_CAP], content=[{"type": "text", "text": text[:DISPLAY_CAP]}])


def resource_tools(hub):
    """``{name: tool}`` of the two tools, when some running server has resources."""
    if not any(c.alive and has_resources(c) for c in hub.clients):
        return {}
    return {LIST: ListResources(hub), READ: ReadResource(hub)}
