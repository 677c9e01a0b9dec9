"""One MCP server as the agent sees it: connect, handshake, list tools, call tools.

States: ``connecting`` -> ``ready`` -> ``dead`` (crashed or closed), or ``connecting`` ->
``failed``, or ``connecting`` -> ``signin`` (an HTTP server answered 401: the hub starts a
sign-in, and connects again once it is done). ``error`` says why in words for the user. A ``tools/list_changed`` notification
marks the list stale; the hub refreshes it before the next model request.
"""

import json
import logging

import gevent

from term2acp import __version__
from term2acp.mcp.config import SSE, STDIO
from term2acp.mcp import prompts
from term2acp.mcp.oauth import SignInNeeded
from term2acp.mcp.rpc import Connection, McpError, TooLarge, plain

log = logging.getLogger(__name__)

PROTOCOL_VERSION = "2025-11-25"
# What we ask for first, then what a server may answer instead (it answers the version it
# speaks when it does not speak ours); anything else fails the handshake.
PROTOCOL_VERSIONS = (PROTOCOL_VERSION, "2025-06-18", "2025-03-26", "2024-11-05")
# Elicitation (form) is declared: a server's question goes to the editor when it can ask
# the user, and is declined otherwise. No sampling, no roots.
CAPABILITIES = {"elicitation": {}}
HANDSHAKE_TIMEOUT = 10.0
LIST_TIMEOUT = 10.0
CALL_TIMEOUT = 120.0
MAX_PAGES = 100
# One server's tool list, across its pages: more fails the server (a list of 10,009 tools
# took 753 MB and the session with it). Far more than a model can be offered at once.
MAX_TOOLS = 5000
MAX_TOOL_BYTES = 8 << 20  # the definitions' JSON, summed

CONNECTING, READY, FAILED, DEAD = "connecting", "ready", "failed", "dead"
SIGNIN = "signin"  # the server answered 401: waiting for the user to sign in


def make_transport(config, cwd, spawn, credentials=None):
    # A transport's module (and http.client, or the keeper process's code) is imported
    # with the first server of its kind: most sessions have none.
    if config.transport == STDIO:
        from term2acp.mcp.stdio import StdioTransport

        return StdioTransport(config, cwd, spawn)
    from term2acp.mcp import http

    if config.transport == SSE:
        return http.SseTransport(config, spawn)
    return http.StreamableHttpTransport(config, spawn, credentials)


class McpClient:
    def __init__(self, config, cwd, spawn, handshake_timeout=HANDSHAKE_TIMEOUT,
                 on_change=None, credentials=None, on_request=None, on_prompts=None):
        self.config = config
        self.name = config.name
        self.credentials = credentials  # oauth.Credentials: an HTTP server we may sign in to
        self._make = lambda: make_transport(config, cwd, spawn, credentials)
        self.on_request = on_request  # (client, method, params) -> result, for server requests
        self.transport = self._make()
        self.spawn = spawn
        self.connection = Connection(self.transport, config.name, self._notification,
                                     self._request, spawn)
        self.challenge = None  # the 401's WWW-Authenticate while the server needs a sign-in
        self.prompts = []  # MCP prompt definitions (dicts)
        self.calls = []  # the contexts of the tool calls running on this server
        self.has_resources = False  # it lists a resource or a template (resources.py)
        self.on_prompts = on_prompts or (lambda client: None)  # the prompt list changed
        self.handshake_timeout = handshake_timeout
        self.on_change = on_change or (lambda client: None)
        self.state = CONNECTING
        self.error = None
        self.server_info = {}
        self.protocol_version = None
        self.capabilities = {}
        self.tools = []  # MCP tool definitions (dicts), in server order
        self.stale = False
        self._closed = False

    # ------------------------------------------------------------ lifecycle
    def connect(self):
        """Handshake and first tools/list; never raises (sets ``state`` and ``error``)."""
        try:
            with gevent.Timeout(self.handshake_timeout, McpError(
                    f"no answer to the MCP handshake within {self.handshake_timeout:g} s")):
                self.transport.open(self.connection)
                result = self.connection.request("initialize", {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": CAPABILITIES,
                    "clientInfo": {"name": "term2acp", "version": __version__},
                }, timeout=self.handshake_timeout)
                if not isinstance(result, dict):
                    raise McpError("the initialize answer is not an object")
                version = result.get("protocolVersion")
                if version not in PROTOCOL_VERSIONS:
                    raise McpError(f"the server speaks MCP {plain(str(version), 40)!r}; this "
                                   f"client speaks {', '.join(PROTOCOL_VERSIONS)}")
                self.protocol_version = version
                self.server_info = result.get("serverInfo") or {}
                capabilities = result.get("capabilities")
                self.capabilities = capabilities if isinstance(capabilities, dict) else {}
                if hasattr(self.transport, "protocol_version"):  # on every later request
                    self.transport.protocol_version = version
                self.connection.notify("notifications/initialized")
                initialized = getattr(self.transport, "initialized", None)
                if initialized is not None:
                    initialized(str(version))
                self.tools = self.list_tools()
                self.stale = False
                self.prompts = self._list_prompts()
                self.has_resources = self._any_resources()
        except SignInNeeded as exc:
            self.state, self.challenge = SIGNIN, exc.challenge
            self.error = f"it needs you to sign in (/mcp-login {self.name})"
            log.info("mcp %s: the server needs a sign-in", self.name)
            return False
        except Exception as exc:  # noqa: BLE001 - any failure here is the server's, reported
            self.state = FAILED if self.state == CONNECTING else self.state
            self.error = self._explain(exc)
            log.warning("mcp %s: could not connect: %s", self.name, self.error)
            return False
        if self.connection.gone is not None:
            self.state, self.error = DEAD, self.connection.gone
            return False
        self.state = READY
        log.info("mcp %s: ready with %d tools", self.name, len(self.tools))
        return True

    def reconnect(self):
        """A fresh transport and handshake (after a sign-in): the old one is closed first."""
        try:
            self.transport.close()
        except Exception:  # noqa: BLE001 - closing is best effort
            log.debug("mcp %s: closing before a reconnect failed", self.name, exc_info=True)
        self.transport = self._make()
        self.connection = Connection(self.transport, self.name, self._notification,
                                     self._request, self.spawn)
        self.state, self.error, self.challenge, self.stale = CONNECTING, None, None, False
        return self.connect()

    def _explain(self, exc):
        text = str(exc) or type(exc).__name__
        if self.connection.gone and self.connection.gone not in text:
            text = f"{text} ({self.connection.gone})"
        return self.config.redact(text)

    def close(self):
        if self._closed:
            return
        self._closed = True
        try:
            self.transport.close()
        except Exception:  # noqa: BLE001 - closing is best effort and bounded
            log.exception("mcp %s: close failed", self.name)
        if self.state in (CONNECTING, READY):
            self.state = DEAD
            self.error = self.error or "the server was stopped"

    @property
    def alive(self):
        return self.state == READY and self.connection.gone is None

    def why_not(self):
        """Why this server cannot serve calls right now, in words for the user and model."""
        if self.connection.gone is not None and self.state == READY:
            self.state, self.error = DEAD, self.connection.gone
        if self.state == CONNECTING:
            return "it is still starting"
        return self.error or "it is not running"

    # ------------------------------------------------------------ tools
    def list_tools(self):
        """Every page of tools/list; raises TooLarge past MAX_TOOLS or MAX_TOOL_BYTES."""
        tools, cursor, size = [], None, 0
        for _ in range(MAX_PAGES):
            params = {"cursor": cursor} if cursor else None
            result = self.connection.request("tools/list", params, timeout=LIST_TIMEOUT)
            if not isinstance(result, dict):
                raise McpError("the tools/list answer is not an object")
            page = result.get("tools") if isinstance(result.get("tools"), list) else []
            sized = [(t, _size(t)) for t in page
                     if isinstance(t, dict) and isinstance(t.get("name"), str)]
            size += sum(n for _, n in sized if n is not None)
            tools.extend(t for t, n in sized if n is not None)
            if len(tools) > MAX_TOOLS or size > MAX_TOOL_BYTES:
                raise TooLarge(f"the server lists more than {MAX_TOOLS} tools or "
                               f"{MAX_TOOL_BYTES >> 20} MiB of tool definitions, the limits; "
                               "its tools are not used")
            cursor = result.get("nextCursor")
            if not cursor:
                break
        else:
            log.warning("mcp %s: tools/list stopped after %d pages", self.name, MAX_PAGES)
        return tools

    def mark_stale(self):
        """List the tools again before they are next used (``refresh``)."""
        self.stale = True

    def refresh(self):
        """Re-list after tools/list_changed; on failure keep the old list."""
        if not self.stale or not self.alive:
            return
        self.stale = False
        try:
            self.tools = self.list_tools()
        except TooLarge as exc:  # the server is dropped, as at start
            log.warning("mcp %s: %s", self.name, exc)
            self.tools = []
            self.connection.lost(str(exc))
        except McpError as exc:
            log.warning("mcp %s: could not refresh the tool list: %s", self.name, exc)

    def call_tool(self, name, arguments, timeout=CALL_TIMEOUT):
        """The raw ``CallToolResult`` dict; raises McpError (ServerGone, RequestTimeout)."""
        result = self.connection.request("tools/call", {"name": name, "arguments": arguments},
                                         timeout=timeout)
        if not isinstance(result, dict):
            raise McpError("the tools/call answer is not an object")
        return result

    def _list_prompts(self):
        try:
            return prompts.list_prompts(self)
        except McpError as exc:  # the tools still work
            log.log(logging.DEBUG if exc.code == -32601 else logging.WARNING,
                    "mcp %s: could not list prompts: %s", self.name, exc)
            return []

    def _any_resources(self):
        """True when the server lists a resource or a template: servers built with the
        SDKs declare the capability whether they have any or not."""
        if "resources" not in self.capabilities:
            return False
        for method, key in (("resources/list", "resources"),
                            ("resources/templates/list", "resourceTemplates")):
            try:
                result = self.connection.request(method, None, timeout=LIST_TIMEOUT)
            except McpError:
                continue
            if isinstance(result, dict) and result.get(key):
                return True
        return False

    def _reload_prompts(self):
        if self.alive:
            self.prompts = self._list_prompts()
            self.on_prompts(self)

    def _request(self, method, params):
        """A server's request: the hub's ``on_request`` decides (elicitation); sampling and
        roots are not offered, so they are refused."""
        if self.on_request is None or method in ("sampling/createMessage", "roots/list"):
            raise McpError(f"Method not found: {method}", -32601)
        return self.on_request(self, method, params)

    # ------------------------------------------------------------ notifications
    def _notification(self, method, params):
        if method == "notifications/tools/list_changed":
            self.stale = True
            self.on_change(self)
        elif method == "notifications/prompts/list_changed":
            self.spawn(self._reload_prompts)
        elif method == "notifications/message" and isinstance(params, dict):
            log.info("mcp %s log (%s): %s", self.name, params.get("level"),
                     self.config.redact(str(params.get("data"))[:2000]))
        else:
            log.debug("mcp %s: notification %s", self.name, method)


def _size(tool):
    """The JSON size of a tool definition; None for one nested too deep to be used."""
    try:
        return len(json.dumps(tool, ensure_ascii=False))
    except (ValueError, RecursionError):
        return None
