"""Model-facing names and schemas for MCP tools.

Names: ``mcp__<server>__<tool>``, each part reduced to ``[A-Za-z0-9_-]``, at most 64
characters (OpenAI's limit, the strictest provider), unique, and stable: the same server
and tool names always give the same tool name, whatever else is configured, except that a
collision gets a suffix derived from the original names (still deterministic).

Schemas: providers accept different subsets of JSON Schema. The cleaned schema is an
object schema at the top (``type: object`` with ``properties``), without the keywords some
provider rejects (``$schema``, ``$id``, ``$comment``, ``examples``, ...) and without
top-level combinators (OpenAI and Anthropic refuse ``oneOf``/``anyOf``/``allOf`` there).
"""

import hashlib
import re

MAX_NAME = 64
PREFIX = "mcp__"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_DROP = frozenset({"$schema", "$id", "$comment", "examples", "deprecated", "readOnly",
                   "writeOnly", "contentMediaType", "contentEncoding", "$anchor",
                   "$dynamicAnchor", "$dynamicRef", "$vocabulary"})
_TOP_DROP = frozenset({"oneOf", "anyOf", "allOf", "not", "if", "then", "else", "enum", "const"})
_MAX_DEPTH = 32
_LITERAL = frozenset({"default", "const", "enum"})  # values, not schemas: kept as given
# Keywords whose value maps names (of properties, definitions) to schemas: keep every key.
_NAME_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})


def reduce(text, fallback):
    return _UNSAFE.sub("_", text or "").strip("_") or fallback


def _digest(*parts):
    return hashlib.sha1("\0".join(parts).encode()).hexdigest()[:8]


def server_names(names):
    """Configured server names -> unique reduced names, in order (stable for a config)."""
    out, taken = [], set()
    for name in names:
        short = reduce(name, "server")[:24]
        if short in taken:
            short = f"{short[:15]}_{_digest(name)}"
            while short in taken:  # the same name configured twice
                short = f"{short[:15]}_{_digest(short, name)}"
        taken.add(short)
        out.append(short)
    return out


def tool_name(server, tool, taken):
    """The model-facing name of ``tool`` on the server reduced to ``server``; adds it to taken."""
    base = reduce(tool, "tool")
    name = f"{PREFIX}{server}__{base}"
    if len(name) > MAX_NAME or name in taken:
        name = f"{name[:MAX_NAME - 9]}_{_digest(server, tool)}"
        while name in taken:
            name = f"{name[:MAX_NAME - 9]}_{_digest(name, tool)}"
    taken.add(name)
    return name


def clean_schema(schema):
    """A copy of an MCP ``inputSchema`` that every provider accepts."""
    if not isinstance(schema, dict):
        return {"type": "object", "properties": {}}
    out = {k: _clean(v, 1, k in _NAME_MAPS) for k, v in schema.items()
           if k not in _DROP and k not in _TOP_DROP}
    out["type"] = "object"
    if not isinstance(out.get("properties"), dict):
        out["properties"] = {}
    if "required" in out and not (isinstance(out["required"], list)
                                  and all(isinstance(r, str) for r in out["required"])):
        del out["required"]
    return out


def _clean(value, depth, names=False):
    if depth > _MAX_DEPTH:
        return {}
    if isinstance(value, dict):
        if names:
            return {k: _clean(v, depth + 1) for k, v in value.items()}
        return {k: v if k in _LITERAL else _clean(v, depth + 1, k in _NAME_MAPS)
                for k, v in value.items() if k not in _DROP}
    if isinstance(value, list):
        return [_clean(v, depth + 1) for v in value]
    return value
