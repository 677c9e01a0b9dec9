"""A hub's sign-ins to remote MCP servers: start one, wait for the browser, sign out.

A server that answers 401 at its handshake starts a sign-in by itself (the user hears the
URL with the next turn's notices, or at once through the editor's URL elicitation where
the editor offers it); ``/mcp-login <server>`` starts a new one, ``/mcp-logout <server>``
deletes the server's token file. Waiting for the browser runs in the hub's group: the
session goes on with its other servers meanwhile. Once signed in, the server is connected
again (its tools appear from the next model request on).
"""

import logging

import gevent

from term2acp.mcp import signin
from term2acp.mcp.client import FAILED, SIGNIN
from term2acp.mcp.config import HTTP
from term2acp.mcp.rpc import McpError

log = logging.getLogger(__name__)

PREPARE_TIMEOUT = 30.0  # discovery and registration


class Accounts:
    def __init__(self, hub):
        self.hub = hub
        self.pending = {}  # id(client) -> signin.Pending

    def start(self, client):
        """Start a sign-in for ``client``: ``(words for the user, the URL or None)``."""
        name = client.name
        if client.config.transport != HTTP or client.credentials is None:
            return (f"The MCP server {name!r} does not sign in here: only streamable HTTP "
                    "servers without a configured Authorization header do."), None
        self.cancel(client)
        try:
            with gevent.Timeout(PREPARE_TIMEOUT, signin.oauth.OAuthFailed(
                    f"discovery and registration took more than {PREPARE_TIMEOUT:g} s")):
                pending = signin.prepare(client.config.url, client.challenge or "")
        except McpError as exc:
            why = client.config.redact(str(exc))
            if client.state == SIGNIN:
                client.state = FAILED
                client.error = f"signing in failed: {why} (/mcp-login {name} tries again)"
            log.warning("mcp %s: sign-in could not start: %s", name, why)
            return f"Signing in to the MCP server {name!r} failed: {why}", None
        self.pending[id(client)] = pending
        greenlet = self.hub.group.spawn(self._wait, client, pending)
        greenlet.name = f"mcp-signin-{name}"
        minutes = f"{signin.WAIT / 60:g}"
        text = (f"The MCP server {name!r} needs you to sign in: open {pending.url} in your "
                f"browser (waiting {minutes} minutes; /mcp-login {name} starts a new sign-in).")
        return text, pending.url

    def _wait(self, client, pending):
        def signed_in():
            # Before the browser hears it worked: the reconnect is under way by then.
            self.hub.reconnect(client)
        try:
            pending.finish(client.credentials, client.name, signed_in)
        except McpError as exc:
            why = client.config.redact(str(exc))
            if self.hub.closed or self.pending.get(id(client)) is not pending:
                # the session ended, or a newer sign-in replaced this one: nothing to tell
                log.info("mcp %s: sign-in ended: %s", client.name, why)
                return
            log.warning("mcp %s: sign-in failed: %s", client.name, why)
            if client.state == SIGNIN:
                client.state = FAILED
                client.error = f"signing in failed: {why} (/mcp-login {client.name} tries again)"
            else:
                self.hub.note(f"Signing in to the MCP server {client.name!r} failed: {why}. "
                              f"/mcp-login {client.name} tries again.")
        finally:
            if self.pending.get(id(client)) is pending:
                del self.pending[id(client)]

    def cancel(self, client):
        pending = self.pending.pop(id(client), None)
        if pending is not None:
            pending.cancel()

    def logout(self, client):
        if client.credentials is None:
            return f"The MCP server {client.name!r} has no sign-in here."
        self.cancel(client)
        had = client.credentials.forget()
        return (f"Signed out of the MCP server {client.name!r}: its token file is deleted."
                if had else f"There was no sign-in for the MCP server {client.name!r}.")

    def close(self):
        for pending in list(self.pending.values()):
            pending.cancel()
        self.pending.clear()
