"""A configured MCP server: what the editor sent, with the secrets kept out of sight.

``env`` values and ``headers`` values are secrets: they go to the server process or the
HTTP peer and nowhere else. ``repr``, ``describe()`` (what the store may keep) and
``safe_url`` never show them.
"""

import urllib.parse

STDIO, HTTP, SSE = "stdio", "http", "sse"
MIN_SECRET = 4  # shorter values (flags like "1", "true") are too common to mask


class ServerConfig:
    """Immutable; equal (and hashed) by what it starts or reaches, not by its secrets.

    Written out rather than a frozen dataclass: this module is on the start-up path (the
    session schemas validate ``mcpServers`` with it) and a dataclass costs its module
    ``import dataclasses`` and an ``exec`` of generated methods (~1.5 ms, issue 16)."""

    __slots__ = ("name", "transport", "command", "args", "env", "url", "headers")

    def __init__(self, name, transport=STDIO, command="", args=(), env=None, url="",
                 headers=None):
        setter = object.__setattr__
        setter(self, "name", name)
        setter(self, "transport", transport)
        setter(self, "command", command)
        setter(self, "args", args)
        setter(self, "env", {} if env is None else env)
        setter(self, "url", url)
        setter(self, "headers", {} if headers is None else headers)

    def __setattr__(self, name, value):
        raise AttributeError(f"ServerConfig is immutable: cannot set {name}")

    def _key(self):
        return (self.name, self.transport, self.command, self.args, self.url)

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        target = self.command if self.transport == STDIO else self.safe_url
        return f"ServerConfig({self.name!r}, {self.transport}, {target!r})"

    @property
    def safe_url(self):
        """The URL without credentials, query or fragment (for logs and messages)."""
        if not self.url:
            return ""
        parts = urllib.parse.urlsplit(self.url)
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))

    def redact(self, text):
        """``text`` with every secret of this entry (env and header values) masked; for
        what the server itself says (stderr, error bodies) before it reaches the log."""
        for secret in (*self.env.values(), *self.headers.values()):
            if len(secret) >= MIN_SECRET and secret in text:
                text = text.replace(secret, "<redacted>")
        return text

    def describe(self):
        """Names and transports only: what the store and ``_meta`` may show."""
        out = {"name": self.name, "transport": self.transport}
        if self.transport == STDIO:
            out["command"] = self.command
        else:
            out["url"] = self.safe_url
        return out


def _pairs(value, what):
    """ACP sends env and headers as ``[{name, value}]`` (strings)."""
    if value is None:
        return {}
    if not isinstance(value, list):
        raise ValueError(f"{what} must be an array of {{name, value}}")
    out = {}
    for pair in value:
        if not isinstance(pair, dict) or not isinstance(pair.get("name"), str) \
                or not isinstance(pair.get("value"), str) or not pair["name"]:
            raise ValueError(f"{what} entries must be {{name, value}} strings")
        out[pair["name"]] = pair["value"]
    return out


def from_acp(entry):
    """One ACP ``McpServer`` object (already validated at the edge) -> ServerConfig.

    stdio: ``{name, command, args, env}`` (``type`` absent or ``"stdio"``);
    http/sse: ``{type, name, url, headers}``. Raises ValueError for anything else (the
    message does not name the entry: ``parse_servers`` does).
    """
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
        raise ValueError("an MCP server needs a non-empty name")
    name = entry["name"]
    kind = entry.get("type") or STDIO
    if kind == STDIO:
        command, args = entry.get("command"), entry.get("args") or []
        if not isinstance(command, str) or not command:
            raise ValueError("command is required")
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ValueError("args must be strings")
        return ServerConfig(name, STDIO, command=command, args=tuple(args),
                            env=_pairs(entry.get("env"), "env"))
    if kind in (HTTP, SSE):
        url = entry.get("url")
        if not isinstance(url, str) or urllib.parse.urlsplit(url).scheme not in ("http", "https"):
            raise ValueError("url must be http(s)")
        return ServerConfig(name, kind, url=url, headers=_pairs(entry.get("headers"), "headers"))
    raise ValueError(f"unknown type {kind!r}")


def parse_servers(entries, absolute_command=True, transports=(STDIO, HTTP, SSE)):
    """A client's ``mcpServers`` -> ServerConfigs; ValueError names the entry at fault.

    v2 requires an absolute ``command`` (``absolute_command=True``); v1 allows a bare name
    (editors send ``npx``, ``uvx``), resolved on PATH when the server starts.
    ``transports`` is what the connection advertised (v2: stdio and http; v1: all three).
    """
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise ValueError("mcpServers must be an array")
    configs = []
    for index, entry in enumerate(entries):
        label = f"mcpServers[{index}]"
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            label += f" ({entry['name']!r})"
        try:
            config = from_acp(entry)
            if config.transport not in transports:
                raise ValueError(f"the {config.transport} transport is not supported here")
            if config.transport == STDIO and absolute_command and not config.command.startswith("/"):
                raise ValueError("command must be an absolute path")
        except ValueError as exc:
            raise ValueError(f"{label}: {exc}") from None
        configs.append(config)
    return configs
