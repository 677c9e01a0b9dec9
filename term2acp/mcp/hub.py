"""A session's MCP servers: connect them in the background, offer their tools, stop them.

``start()`` spawns one connecting greenlet per server and returns at once; ``wait_ready``
bounds how long the first prompt waits for pending handshakes. ``tools()`` is the current
``{name: McpTool}`` of every server that finished its handshake (a tool list marked stale
by ``tools/list_changed`` is fetched again first); ``merged(builtin)`` is a live mapping
of our tools plus those, for a turn to keep across model requests. ``notices()`` returns,
once each, what the user should hear about servers that failed to start or stopped.
``close()`` stops every server process group and HTTP session, bounded.

Every greenlet the hub starts (connects, transport readers) belongs to its ``Group``.
"""

import logging
import uuid
from collections.abc import Mapping

import gevent
from gevent.event import Event
from gevent.pool import Group

from term2acp.mcp.adapter import McpTool, elicit
from term2acp.mcp.client import (
    CALL_TIMEOUT,
    CONNECTING,
    DEAD,
    FAILED,
    HANDSHAKE_TIMEOUT,
    READY,
    SIGNIN,
    McpClient,
)
from term2acp.core import elicitation
from term2acp.mcp.accounts import Accounts
from term2acp.mcp.config import HTTP
from term2acp.mcp.oauth import Credentials
from term2acp.mcp.prompts import account_commands, prompt_command
from term2acp.mcp.resources import resource_tools
from term2acp.mcp.rpc import McpError
from term2acp.mcp.naming import PREFIX, server_names, tool_name
from term2acp.mcp.offer import MAX_TOOLS, Offer

log = logging.getLogger(__name__)

READY_TIMEOUT = 10.0
CLOSE_TIMEOUT = 5.0


class McpHub:
    """Built whole: ``on_commands`` (``()``: the session's slash commands changed, called in
    the hub's group) and ``gate`` (``()`` -> the running prompt's approval gate, for
    elicitation, or None) are the session's, given here (``mcp/session.py``)."""

    def __init__(self, configs, root, call_timeout=CALL_TIMEOUT,
                 handshake_timeout=HANDSHAKE_TIMEOUT, data_dir=None, on_commands=None,
                 gate=None):
        self.root = root
        self.call_timeout = call_timeout
        self.group = Group()
        self.data_dir = data_dir
        self._on_commands = on_commands
        self._gate = gate
        self.clients = [McpClient(c, root, self.group.spawn, handshake_timeout, self._changed,
                                  _credentials(c, data_dir), self._server_request,
                                  self._prompts_changed)
                        for c in configs]
        self.accounts = Accounts(self)
        self._signins = []  # (server name, words, url) started by a 401, not yet shown
        self._commands = None  # cached commands()
        self._short = dict(zip((id(c) for c in self.clients),
                               server_names([c.name for c in configs])))
        self._connecting = []
        self._names = {}  # (client id, MCP tool name) -> model-facing name, never reassigned
        self._taken = set()
        self._adapters = {}  # model-facing name -> McpTool (kept while the definition holds)
        self._tools = None  # cached tools() result; None when something changed
        self._notices = []
        self._told = set()  # client ids the user has heard about
        self._told_pending = set()  # client ids the user has heard are still starting
        self.changed = Event()  # set by tools/list_changed (cleared by whoever waits on it)
        self.closed = False
        self._relisted = set()  # unknown tool names that made the servers list again
        self.enabled = []  # tool names the model enabled with mcp_tools, most recent last
        self._told_left_out = None  # the notice about tools left out the user last heard

    def __bool__(self):
        return bool(self.clients)

    def describe(self):
        """Names and transports, no secrets: for the store and ``_meta``."""
        return [c.config.describe() for c in self.clients]

    # ------------------------------------------------------------ start
    def start(self):
        for client in self.clients:
            greenlet = self.group.spawn(self._connect, client)
            greenlet.name = f"mcp-connect-{client.name}"
            self._connecting.append(greenlet)
        return self

    def _connect(self, client):
        client.connect()
        self._tools = None
        if client.prompts or client.credentials is not None:
            self._prompts_changed(client)  # prompts, or sign-in to offer (the face dedups)
        if client.state == SIGNIN and not self.closed:
            text, url = self.accounts.start(client)
            if url is not None or client.state != FAILED:  # a failure is told as one
                self._signins.append((client.name, text, url))

    def login(self, client):
        """``/mcp-login``: a new sign-in, shown at once (the command runs in a turn)."""
        return self.present(client.name, *self.accounts.start(client))

    def present(self, name, text, url):
        """The sign-in URL for the user: through the editor's URL elicitation where it takes
        one (not waited for), else ``text`` (an agent message)."""
        gate = self._gate() if self._gate is not None else None
        if url is None or gate is None or not gate.elicits(elicitation.URL):
            return text
        question = elicitation.Elicitation(
            elicitation.URL, f"Sign in to the MCP server {name!r} in your browser.", url=url,
            elicitation_id=uuid.uuid4().hex)
        shown = self.group.spawn(gate.elicit, None, question)
        shown.name = f"mcp-signin-url-{name}"
        return f"The MCP server {name!r} needs you to sign in: the editor shows its sign-in page."

    def reconnect(self, client):
        """Connect ``client`` again (after a sign-in), as a pending handshake."""
        self._told.discard(id(client))
        greenlet = self.group.spawn(self._reconnected, client)
        greenlet.name = f"mcp-reconnect-{client.name}"
        self._connecting.append(greenlet)

    def _reconnected(self, client):
        ready = client.reconnect()
        self._changed(client)
        self._prompts_changed(client)
        if ready:
            self._notices.append(f"Signed in to the MCP server {client.name!r}: its tools are "
                                 "available.")

    def _prompts_changed(self, _client):
        self._commands = None
        if not self.closed and self._on_commands is not None:
            self.group.spawn(self._on_commands)

    def commands(self):
        """The slash commands the servers bring (``prompts.py``): sign-in, then prompts."""
        if self._commands is None:
            out = account_commands(self) if any(_signs_in(c) for c in self.clients) else []
            for client in self.clients:
                if client.state == READY:
                    out.extend(prompt_command(self, client, self._short[id(client)], p)
                               for p in client.prompts)
            self._commands = out
        return self._commands

    def client(self, name):
        return next((c for c in self.clients if c.name == name), None)

    def note(self, text):
        """A message for the user with the next notices."""
        self._notices.append(text)

    def _server_request(self, client, method, params):
        """A server's request: elicitation goes to the user through the tool call it came
        with (``adapter.elicit``); anything else is not offered."""
        if method == "elicitation/create":
            return elicit(client, params)
        raise McpError(f"Method not found: {method}", -32601)

    def wait_ready(self, timeout=READY_TIMEOUT):
        """Wait for pending handshakes at most ``timeout`` s; True when none is pending."""
        pending = [g for g in self._connecting if not g.dead]
        if pending:
            gevent.joinall(pending, timeout=timeout)
        return all(g.dead for g in self._connecting)

    @property
    def pending(self):
        return [c.name for c in self.clients if c.state == CONNECTING]

    # ------------------------------------------------------------ tools
    def _changed(self, _client):
        self._tools = None
        self.changed.set()

    def tools(self):
        if self.closed:
            return {}
        for client in self.clients:
            if client.stale and client.alive:
                client.refresh()
                self._tools = None
        if self._tools is None:
            self._tools = self._build()
        return self._tools

    def _build(self):
        out = {}
        for client in self.clients:
            if client.state not in (READY, DEAD) or (client.state == DEAD and not client.tools):
                continue
            for definition in client.tools:
                key = (id(client), definition["name"])
                name = self._names.get(key)
                if name is None:
                    name = self._names[key] = tool_name(self._short[id(client)],
                                                        definition["name"], self._taken)
                adapter = self._adapters.get(name)
                if adapter is None or adapter.definition is not definition:
                    adapter = self._adapters[name] = McpTool(self, client, name, definition)
                out[name] = adapter
        out.update(resource_tools(self))  # while some server has resources
        return out

    def merged(self, builtin, choice=None, limit=MAX_TOOLS):
        """A live mapping of ``builtin`` plus the MCP tools the request offers (refreshed on
        every look; ``offer.py``: the user's ``choice`` per server, at most ``limit``)."""
        return _Merged(builtin, self, choice, limit)

    def relist(self, name):
        """A call of an MCP tool name not known: list every server's tools again, once per
        name (the server's tools/list_changed may still be on its way). True when it did."""
        if name in self._relisted or self.closed:
            return False
        self._relisted.add(name)
        for client in self.clients:
            if client.alive:
                client.mark_stale()
        self.tools()
        return True

    def enable(self, names, limit):
        """The model asked for these tools (mcp_tools): offered first from now on; the
        least recently enabled give way beyond ``limit``."""
        self.enabled = [n for n in self.enabled if n not in names] + list(names)
        del self.enabled[:-limit]

    # ------------------------------------------------------------ notices
    def left_out_news(self, notice):
        """``notice`` (of the tools left out of the offer, or None) when the user has not
        heard it yet (it changed), else None."""
        if notice == self._told_left_out:
            return None
        self._told_left_out = notice
        return notice

    def notices(self):
        """One-time messages for the user: sign-ins to do (shown through the editor where
        it can), servers that failed to start or stopped."""
        while self._signins:
            self._notices.append(self.present(*self._signins.pop(0)))
        for client in self.clients:
            if id(client) in self._told or self.closed:
                continue
            why = None
            if client.state == CONNECTING and self._connecting and id(client) not in self._told_pending:
                self._told_pending.add(id(client))
                self._notices.append(f"The MCP server {client.name!r} is still starting; its tools "
                                     "become available once it is ready.")
            elif client.state == FAILED:
                why = f"The MCP server {client.name!r} could not be started: {client.error}"
            elif client.state in (READY, DEAD) and client.connection.gone is not None:
                client.why_not()  # moves it to DEAD with the reason
                why = f"The MCP server {client.name!r} stopped: {client.error}. Its tools fail until " \
                      "the session is resumed."
            if why:
                self._told.add(id(client))
                self._notices.append(why)
        out, self._notices = self._notices, []
        return out

    # ------------------------------------------------------------ stop
    def close(self, timeout=CLOSE_TIMEOUT):
        """Stop every server (in parallel) and every greenlet of the hub; bounded."""
        if self.closed:
            return
        self.closed = True
        # Connecting greenlets are not killed first: one inside Popen would lose the child.
        # Closing the transports ends their handshakes (the connection is lost) instead.
        self.accounts.close()
        closers = [self.group.spawn(client.close) for client in self.clients]
        gevent.joinall(closers + self._connecting, timeout=timeout)
        self.group.kill(block=True, timeout=1)
        self._tools = {}


def _signs_in(client):
    """The server needed a sign-in (now or before): /mcp-login and /mcp-logout are offered."""
    return client.credentials is not None and (
        client.credentials.state is not None or client.state == SIGNIN)


def _credentials(config, data_dir):
    """The sign-in of a streamable HTTP server, unless the user configured its
    Authorization header (then the header is the credential and a 401 is an error)."""
    if config.transport != HTTP or not data_dir or \
            any(k.lower() == "authorization" for k in config.headers):
        return None
    return Credentials(data_dir, config.url)


class _Merged(Mapping):
    """Built-in tools first, then the MCP tools on offer, looked up in the hub each time (its
    list may change); a tool left out of the offer can still be called by name."""

    def __init__(self, builtin, hub, choice=None, limit=MAX_TOOLS):
        self.builtin = builtin
        self.hub = hub
        self.choice = choice or {}
        self.limit = limit
        self._offer = None  # (hub tools, enabled) -> Offer, rebuilt when either changes

    def offer(self):
        extra = self.hub.tools()
        key = (extra, tuple(self.hub.enabled))
        if self._offer is None or self._offer[0][0] is not extra or self._offer[0][1] != key[1]:
            self._offer = (key, Offer(self.builtin, extra, self.choice, self.limit,
                                      self.hub.enabled, self.hub))
        return self._offer[1]

    def _all(self):
        return self.offer().tools

    def __getitem__(self, name):
        if name in self.builtin:
            return self.builtin[name]
        offer = self.offer()
        tool = offer.tools.get(name) or offer.callable.get(name)
        if tool is None and name.startswith(PREFIX) and self.hub.relist(name):
            offer = self.offer()  # a list_changed still on its way (HTTP: another stream)
            tool = offer.tools.get(name) or offer.callable.get(name)
        if tool is None:
            raise KeyError(name)
        return tool

    def __iter__(self):
        return iter(self._all())

    def __len__(self):
        return len(self._all())

    def values(self):
        return self._all().values()

    def items(self):
        return self._all().items()
