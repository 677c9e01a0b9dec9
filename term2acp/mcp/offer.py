"""Which MCP tools a model request offers: the user's choice per server, then a cap.

Providers bound the tools of one request (OpenAI accepts at most 128, built-ins
included), and a long list costs every request its tokens. So:

* ``[mcp] tools`` in the agent's config file names, per configured server, the tools it
  may offer (exact names or ``fnmatch`` patterns such as ``"search_*"``); a server that is
  not listed offers all its tools. A tool the user left out is neither offered nor callable.
* ``[mcp] max_tools`` (128 by default) caps what one request offers, built-ins included.
  When the MCP tools do not fit, the tools the model enabled come first (most recent
  first), then the servers' tools in turn (one of each server, then the next of each), and
  one more tool, ``mcp_tools``, says how many were left out and lets the model search them
  and enable the ones it needs from its next request on. The user hears once (per change)
  how many were left out.
"""

import fnmatch

from term2acp.tools.base import Tool, ToolError, ToolResult

MAX_TOOLS = 128  # OpenAI's limit for one request, the strictest provider's
FINDER = "mcp_tools"
MAX_MATCHES = 30
SUMMARY_CAP = 160


def allowed(choice, server, tool):
    """True when the user's ``[mcp] tools`` lets ``server`` offer ``tool``."""
    patterns = choice.get(server) if choice else None
    return patterns is None or any(fnmatch.fnmatchcase(tool, p) for p in patterns)


def choose(groups, enabled, budget):
    """Names to offer, at most ``budget``: ``enabled`` (most recent first), then one tool
    of each group in turn. ``groups`` are lists of names in server order."""
    known = {name for group in groups for name in group}
    picked = dict.fromkeys(n for n in reversed(enabled) if n in known)
    picked = dict.fromkeys(list(picked)[:budget])
    depth = max((len(g) for g in groups), default=0)
    for index in range(depth):
        if len(picked) >= budget:
            break
        for group in groups:
            if index < len(group) and group[index] not in picked:
                picked[group[index]] = None
                if len(picked) >= budget:
                    break
    return list(picked)


class Offer:
    """What one request offers: ``tools`` (name -> tool, built-ins first), ``left_out``
    (name -> MCP tool not offered now), and ``callable`` (every MCP tool the user allows)."""

    def __init__(self, builtin, mcp_tools, choice, limit, enabled, hub):
        mcp = {n: t for n, t in mcp_tools.items()
               if n not in builtin and allowed(choice, t.server, t.tool)}
        self.callable = mcp
        self.tools = dict(builtin)
        if len(builtin) + len(mcp) <= limit:
            self.tools.update(mcp)
            self.left_out = {}
            return
        groups = {}
        for name, tool in mcp.items():
            groups.setdefault(id(tool.client), []).append(name)
        budget = max(0, limit - len(builtin) - 1)  # one place for mcp_tools
        offered = choose(list(groups.values()), enabled, budget)
        self.tools.update((n, mcp[n]) for n in offered)
        self.left_out = {n: t for n, t in mcp.items() if n not in self.tools}
        self.tools[FINDER] = FinderTool(hub, self, limit)

    def notice(self):
        """What the user is told while tools are left out (None when none is)."""
        if not self.left_out:
            return None
        counts = {}
        for tool in self.callable.values():
            name = tool.server
            offered, total = counts.get(name, (0, 0))
            counts[name] = (offered + (tool.name in self.tools), total + 1)
        per_server = ", ".join(f"{server}: {offered} of {total}"
                               for server, (offered, total) in list(counts.items())[:5])
        return (f"{len(self.left_out)} MCP tools are not offered to the model ({per_server}"
                f"{', ...' if len(counts) > 5 else ''} offered): a request offers at most "
                f"{self.tools[FINDER].limit} tools, built-ins included. The model can search "
                "and enable them with its mcp_tools tool; choose per server with [mcp] tools "
                "in the agent's config file.")


class FinderTool(Tool):
    """``mcp_tools``: search the MCP tools left out of this request, and enable some."""

    name = FINDER
    kind = "search"

    def __init__(self, hub, offer, limit):
        self.hub, self.offer, self.limit = hub, offer, limit
        self.description = (
            f"{len(offer.left_out)} MCP server tools are not offered in this request (at most "
            f"{limit} tools can be). Search them by words with {{\"query\": \"...\"}} (names and "
            "descriptions), then enable the ones you need with {\"enable\": [\"mcp__server__tool\", "
            "...]}: they are offered from your next step on (the least recently enabled make "
            "room when there are too many).")

    def spec(self):
        return {"name": FINDER, "description": self.description, "parameters": {
            "type": "object", "properties": {
                "query": {"type": "string", "description": "words to look for"},
                "enable": {"type": "array", "items": {"type": "string"},
                           "description": "tool names to offer from the next step on"}}}}

    def load(self, arguments):
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ToolError("mcp_tools arguments must be a JSON object")
        query, enable = arguments.get("query"), arguments.get("enable")
        if query is not None and not isinstance(query, str) or enable is not None and not (
                isinstance(enable, list) and all(isinstance(n, str) for n in enable)):
            raise ToolError("mcp_tools takes {\"query\": string} and/or {\"enable\": [names]}")
        return {"query": query or "", "enable": list(enable or ())[:MAX_MATCHES]}

    def title(self, args):
        if args.get("enable"):
            return f"Enable MCP tools: {', '.join(args['enable'])[:200]}"
        return f"Search MCP tools: {args.get('query', '')[:200]}"

    def approval(self, args, ctx):
        return None  # enabling offers a tool; each call of it still asks

    def run(self, args, ctx):
        lines = []
        if args["enable"]:
            known = [n for n in args["enable"] if n in self.offer.callable]
            unknown = [n for n in args["enable"] if n not in self.offer.callable]
            self.hub.enable(known, self.limit)
            if known:
                lines.append(f"Enabled (offered from your next step on): {', '.join(known)}.")
            if unknown:
                lines.append(f"No such MCP tool: {', '.join(unknown)[:500]}.")
        if args["query"] or not args["enable"]:
            lines.append(self._search(args["query"]))
        return ToolResult("\n".join(lines))

    def _search(self, query):
        words = query.lower().split()
        matches = [t for t in self.offer.left_out.values()
                   if all(w in f"{t.name} {t.description}".lower() for w in words)]
        if not matches:
            return f"No MCP tool left out of this request matches {query!r}."
        shown = [f"{t.name}: {' '.join(t.description.split())[:SUMMARY_CAP]}"
                 for t in matches[:MAX_MATCHES]]
        more = f"\n(and {len(matches) - MAX_MATCHES} more: narrow the query)" \
            if len(matches) > MAX_MATCHES else ""
        return f"{len(matches)} matching MCP tools left out of this request:\n" + "\n".join(shown) + more
