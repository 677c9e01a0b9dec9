"""A configured MCP server: what the editor sent, with the secrets kept out of sight.

``env`` values and ``headers`` values are secrets: they go to the server process or the
HTTP peer and nowhere else. ``repr``, ``describe()`` (what the store may keep) and
``safe_url`` never show them, and no error message quotes them.

Values are checked when the entry is read, so that nothing downstream (an HTTP library's
error, a server's stderr) can echo a malformed secret in a form masking does not find:
trailing whitespace and line breaks (a token pasted with its newline) are stripped; a
header value with any other control character, an env value with NUL or a control
character other than tab and line feed, a header name that is not an HTTP token and
an env name with ``=`` are refused, naming the server and the header or variable, never
the value. Server names are unique within one list: a session grant and the model's
tool names belong to one configured server.
"""

import json
import urllib.parse

STDIO, HTTP, SSE = "stdio", "http", "sse"
MIN_SECRET = 6  # shorter values (flags, counts, "true", "debug") are too common to mask
_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_CONTROL = frozenset(map(chr, (*range(0x20), 0x7f)))
_ENV_CONTROL = _CONTROL - {"\t", "\n"}  # multi-line values (PEM keys) are legitimate
_HEADER_CONTROL = _CONTROL - {"\t"}
# Framing is ours: a configured Content-Length or Transfer-Encoding would corrupt requests.
_RESERVED_HEADERS = frozenset({"content-length", "transfer-encoding"})


class ServerConfig:
    """Immutable; equal (and hashed) by what it starts or reaches, not by its secrets.

    Written out rather than a frozen dataclass: this module is on the start-up path (the
    session schemas validate ``mcpServers`` with it) and a dataclass costs its module
    ``import dataclasses`` and an ``exec`` of generated methods."""

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

    def secrets(self):
        """What must never be shown: env and header values, the URL's password and query
        values (``?api_key=...``), longest first so a secret containing another is masked
        whole."""
        found = [*self.env.values(), *self.headers.values()]
        if self.url:
            parts = urllib.parse.urlsplit(self.url)
            found.append(parts.password or "")
            found.extend(v for _, v in urllib.parse.parse_qsl(parts.query))
        return sorted({s for s in found if len(s) >= MIN_SECRET}, key=len, reverse=True)

    def redact(self, text):
        """``text`` with every secret of this entry masked; for what the server itself
        says (stderr, error bodies) before it reaches the log."""
        for secret in self.secrets():
            if secret in text:
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
    """ACP sends env and headers as ``[{name, value}]`` (strings); checked (module doc)."""
    if value is None:
        return {}
    if not isinstance(value, list):
        raise ValueError(f"{what} must be an array of {{name, value}}")
    out = {}
    check = _header if what == "headers" else _env
    for pair in value:
        if not isinstance(pair, dict) or not isinstance(pair.get("name"), str) \
                or not isinstance(pair.get("value"), str) or not pair["name"]:
            raise ValueError(f"{what} entries must be {{name, value}} strings")
        name = pair["name"]
        out[name] = check(name, pair["value"])
    return out


def _header(name, value):
    if not set(name) <= _TOKEN:
        raise ValueError(f"header name {_shown(name)} is not a valid HTTP header name")
    if name.lower() in _RESERVED_HEADERS:
        raise ValueError(f"header {name} is set by the agent itself and cannot be configured")
    value = value.strip(" \t\r\n")
    if not _HEADER_CONTROL.isdisjoint(value):
        raise ValueError(f"the value of header {name} contains a line break or another "
                         "control character (the value is not shown)")
    return value


def _env(name, value):
    if "=" in name or not _CONTROL.isdisjoint(name):
        raise ValueError(f"environment variable name {_shown(name)} contains '=' or a "
                         "control character")
    value = value.rstrip("\r\n")
    if not _ENV_CONTROL.isdisjoint(value):
        raise ValueError(f"the value of environment variable {name} contains NUL or a "
                         "control character other than tab and line feed (the value is not shown)")
    return value


def _shown(name):
    """A name for a message: quoted with escapes, bounded (names are not secrets)."""
    return repr(name[:64])


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
        try:
            if not _CONTROL.isdisjoint(url) or " " in url or not urllib.parse.urlsplit(url).hostname:
                raise ValueError
            urllib.parse.urlsplit(url).port  # noqa: B018 - raises for a port that is not one
        except ValueError:
            raise ValueError("url must name a host and a valid port and contain no spaces or "
                             "control characters") from None
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
    configs, seen = [], {}
    for index, entry in enumerate(entries):
        label = f"mcpServers[{index}]"
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            label += f" ({_shown(entry['name'])})"
        try:
            config = from_acp(entry)
            if config.name in seen:
                raise ValueError(f"the name is already used by mcpServers[{seen[config.name]}]; "
                                 "each MCP server needs a name of its own")
            seen[config.name] = index
            if config.transport not in transports:
                raise ValueError(f"the {config.transport} transport is not supported here")
            if config.transport == STDIO and absolute_command and not config.command.startswith("/"):
                raise ValueError("command must be an absolute path")
        except ValueError as exc:
            raise ValueError(f"{label}: {exc}") from None
        configs.append(config)
    return configs


def masked_servers(message):
    """A JSON-RPC message whose params carry ``mcpServers``, as text with every env and
    header value and the URLs' credentials and queries masked (for the DEBUG wire log);
    None for any other message."""
    params = message.get("params") if isinstance(message, dict) else None
    servers = params.get("mcpServers") if isinstance(params, dict) else None
    if not isinstance(servers, list):
        return None
    masked = [_masked(entry) if isinstance(entry, dict) else entry for entry in servers]
    return json.dumps({**message, "params": {**params, "mcpServers": masked}}, ensure_ascii=False)


def _masked(entry):
    out = dict(entry)
    for key in ("env", "headers"):
        if isinstance(out.get(key), list):
            out[key] = [{**pair, "value": "<redacted>"} if isinstance(pair, dict) and "value" in pair
                        else pair for pair in out[key]]
    if isinstance(out.get("url"), str):
        parts = urllib.parse.urlsplit(out["url"])
        if parts.password or parts.query or parts.fragment:
            try:
                safe = ServerConfig("", HTTP, url=out["url"]).safe_url
            except ValueError:  # a port that is not a number
                safe = f"{parts.scheme}://"
            out["url"] = safe + " (credentials and query masked)"
    return out
