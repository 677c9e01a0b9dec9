"""Signing in to a remote MCP server: the authorization URL and the loopback redirect.

:func:`prepare` (bounded, after a 401 or ``/mcp-login``): discovery and registration
(``oauth.py``), a listener on ``127.0.0.1:<free port>``, then the authorization URL with
PKCE S256 (a fresh verifier each time), a fresh ``state`` and the ``resource`` (RFC 8707).
The user opens the URL; the authorization server sends the browser back to
``http://127.0.0.1:<port>/callback?code=...&state=...``. :meth:`Pending.finish` waits for
that request (bounded), refuses one whose ``state`` is not ours (and keeps waiting),
exchanges the code (with the verifier and the resource), saves the sign-in, then answers
the browser with a short page saying how it went, and closes the listener. Any other path
gets 404; nothing but the callback is read from the browser.
"""

import logging
import socket
import urllib.parse

import gevent

from term2acp.mcp import oauth

log = logging.getLogger(__name__)

WAIT = 300.0  # for the user to sign in in the browser
READ_TIMEOUT = 5.0
HEAD_CAP = 16 * 1024
CALLBACK = "/callback"


class SignInTimedOut(oauth.OAuthFailed):
    pass


class Listener:
    """The loopback redirect target: one socket on 127.0.0.1, a port of the kernel's choice."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            self.sock.bind(("127.0.0.1", 0))
            self.sock.listen(8)
        except OSError:
            self.sock.close()
            raise
        self.port = self.sock.getsockname()[1]
        self.redirect_uri = f"http://127.0.0.1:{self.port}{CALLBACK}"

    def wait(self, state, timeout, on_code):
        """Serve the browser until a callback with ``state`` arrives; ``on_code(code)``
        returns the page's words (or raises). Raises SignInTimedOut after ``timeout``."""
        with gevent.Timeout(timeout, SignInTimedOut(
                f"the sign-in was not completed within {timeout / 60:g} minutes")):
            while True:
                try:
                    conn, _ = self.sock.accept()
                except OSError:  # closed: a new sign-in replaced this one, or the hub closed
                    raise oauth.OAuthFailed("the sign-in was cancelled") from None
                with conn:
                    done = self._serve(conn, state, on_code)
                if done:
                    return

    def _serve(self, conn, state, on_code):
        from authlib.oauth2.rfc6749.errors import MismatchingStateException, MissingCodeException
        from authlib.oauth2.rfc6749.parameters import parse_authorization_code_response

        target = _request_target(conn)
        if target is None:
            return False
        parts = urllib.parse.urlsplit(target)
        if parts.path != CALLBACK:
            _reply(conn, 404, "Not found.")
            return False
        query = dict(urllib.parse.parse_qsl(parts.query))
        if query.get("state") != state:
            _reply(conn, 400, "This sign-in link is not the one the agent is waiting for.")
            return False
        if "error" in query:
            words = _plain(query.get("error_description") or query["error"])
            _reply(conn, 400, f"Sign-in refused: {words}")
            raise oauth.OAuthFailed(f"the authorization server refused the sign-in ({words})")
        try:
            params = parse_authorization_code_response(f"http://127.0.0.1{target}", state)
        except (MismatchingStateException, MissingCodeException):
            _reply(conn, 400, "The sign-in answer has no code.")
            return False
        try:
            words = on_code(params["code"])
        except oauth.McpError as exc:
            _reply(conn, 500, f"Sign-in failed: {_plain(str(exc))}")
            raise
        _reply(conn, 200, words)
        return True

    def close(self):
        self.sock.close()


def _request_target(conn):
    conn.settimeout(READ_TIMEOUT)
    head = b""
    try:
        while b"\r\n\r\n" not in head and len(head) < HEAD_CAP:
            chunk = conn.recv(4096)
            if not chunk:
                break
            head += chunk
    except OSError:
        return None
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    method, _, rest = line.partition(" ")
    target = rest.rpartition(" ")[0] if " " in rest else rest
    if method != "GET" or not target.startswith("/"):
        _reply(conn, 405, "Only the sign-in redirect is served here.")
        return None
    return target


def _plain(text):
    return "".join(c for c in text if c.isprintable())[:200]


def _reply(conn, status, words):
    import html

    body = (f"<!doctype html><meta charset=utf-8><title>term2acp</title>"
            f"<p>{html.escape(words)}</p>").encode()
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
              500: "Internal Server Error"}[status]
    try:
        conn.sendall(f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n"
                     f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\n"
                     "Connection: close\r\n\r\n".encode() + body)
    except OSError:
        pass


class Pending:
    """A sign-in waiting for the browser: ``url`` to show, ``finish`` to wait for it."""

    def __init__(self, found, client, listener, verifier, state, url):
        self.found, self.client, self.listener = found, client, listener
        self.verifier, self.state, self.url = verifier, state, url

    def finish(self, credentials, server, after=None, timeout=WAIT):
        """Wait for the redirect, exchange the code, save the sign-in, call ``after`` (before
        the browser is answered); raises OAuthFailed."""
        def exchange(code):
            record = {"resource": self.found["resource"], "metadata": self.found["metadata"],
                      "client": self.client}
            token = oauth.token_request(record, "authorization_code", code=code,
                                        redirect_uri=self.listener.redirect_uri,
                                        code_verifier=self.verifier)
            credentials.signed_in({**record, "token": token})
            if after is not None:
                after()
            return f"Signed in to the MCP server {server}. You can close this tab."
        try:
            self.listener.wait(self.state, timeout, exchange)
        finally:
            self.listener.close()

    def cancel(self):
        self.listener.close()


def prepare(url, challenge=""):
    """Discovery, registration and the authorization URL: a :class:`Pending` sign-in."""
    from authlib.common.security import generate_token
    from authlib.oauth2.rfc6749.parameters import prepare_grant_uri
    from authlib.oauth2.rfc7636 import create_s256_code_challenge

    found = oauth.discover(url, challenge)
    listener = Listener()
    try:
        client = oauth.register(found["metadata"], listener.redirect_uri)
        verifier, state = generate_token(64), generate_token(32)
        link = prepare_grant_uri(found["metadata"]["authorization_endpoint"], client["client_id"],
                                 "code", listener.redirect_uri, found["scope"], state,
                                 code_challenge=create_s256_code_challenge(verifier),
                                 code_challenge_method="S256", resource=found["resource"])
    except BaseException:
        listener.close()
        raise
    return Pending(found, client, listener, verifier, state, link)
