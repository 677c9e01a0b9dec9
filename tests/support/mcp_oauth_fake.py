"""A remote MCP server that needs a sign-in, and its OAuth authorization server, on one
loopback port (stdlib only, threads, never gevent)::

    python3 tests/support/mcp_oauth_fake.py     # prints PORT <n> once it listens

* ``/mcp``: the fake MCP server of mcp_fake.py (streamable HTTP), only with ``Authorization:
  Bearer <a live token issued for this resource>``; else 401 with ``WWW-Authenticate: Bearer
  resource_metadata="<...>/.well-known/oauth-protected-resource/mcp"`` (RFC 9728).
* the authorization server (issuer: the origin): RFC 8414 metadata, dynamic registration
  (RFC 7591), ``/authorize`` that signs the browser in at once and redirects with a code,
  ``/token`` (authorization_code, refresh_token). It checks what a real one would, and
  answers 400 when anything is off: the client and its registered loopback redirect, PKCE
  S256 (the verifier against the challenge), ``state`` present, ``resource`` (RFC 8707)
  naming the MCP server on authorize and on every token request. Refresh tokens rotate.
* ``/control/revoke`` (POST) ends every token, ``/control/expire`` (POST) every access
  token (refresh tokens stay), ``/control/stats`` (GET) counts what happened.

``MCP_OAUTH_EXPIRES_IN`` is the access tokens' ``expires_in`` (3600 by default);
``MCP_OAUTH_NO_PKCE=1`` leaves S256 out of the metadata, ``MCP_OAUTH_OTHER_RESOURCE=1``
names another resource in the protected resource metadata.
"""

import base64
import hashlib
import json
import os
import secrets
import sys
import threading
import urllib.parse

import mcp_fake

EXPIRES_IN = int(os.environ.get("MCP_OAUTH_EXPIRES_IN") or 3600)
# Broken servers, for the refusals: metadata without PKCE S256, or naming another resource.
NO_PKCE = bool(os.environ.get("MCP_OAUTH_NO_PKCE"))
OTHER_RESOURCE = bool(os.environ.get("MCP_OAUTH_OTHER_RESOURCE"))


class OAuthApp:
    def __init__(self):
        self.mcp = mcp_fake.StreamableApp(mcp_fake.Server())
        self.lock = threading.RLock()  # _refuse counts while _token holds it
        self.clients = {}  # client_id -> redirect_uris
        self.codes = {}  # code -> what it was issued for
        self.access = {}  # access token -> resource
        self.refresh = {}  # refresh token -> (client_id, resource)
        self.stats = {"registrations": 0, "authorizations": 0, "code_grants": 0,
                      "refresh_grants": 0, "unauthorized": 0, "bearer_requests": 0,
                      "refused": []}

    def origin(self, h):
        return f"http://127.0.0.1:{h.server.server_port}"

    def resource(self, h):
        return self.origin(h) + "/mcp"

    # ------------------------------------------------------------ dispatch
    def get(self, h):
        path, query = self._split(h)
        if path == "/mcp":
            if self._bearer(h):
                self.mcp.get(h)
        elif path == "/.well-known/oauth-protected-resource/mcp":
            resource = self.origin(h) + "/elsewhere" if OTHER_RESOURCE else self.resource(h)
            h.send_plain(200, json.dumps({"resource": resource,
                                          "authorization_servers": [self.origin(h)],
                                          "bearer_methods_supported": ["header"]}))
        elif path == "/.well-known/oauth-authorization-server":
            o = self.origin(h)
            h.send_plain(200, json.dumps({
                "issuer": o, "authorization_endpoint": o + "/authorize",
                "token_endpoint": o + "/token", "registration_endpoint": o + "/register",
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "code_challenge_methods_supported": ["plain"] if NO_PKCE else ["S256"],
                "token_endpoint_auth_methods_supported": ["none"]}))
        elif path == "/authorize":
            self._authorize(h, query)
        elif path == "/control/stats":
            with self.lock:
                h.send_plain(200, json.dumps(self.stats))
        else:
            h.send_plain(404, "Not Found", "text/plain")

    def post(self, h):
        path, _ = self._split(h)
        if path == "/mcp":
            if self._bearer(h):
                self.mcp.post(h)
        elif path == "/register":
            self._register(h)
        elif path == "/token":
            self._token(h)
        elif path in ("/control/revoke", "/control/expire"):
            with self.lock:
                self.access.clear()
                if path == "/control/revoke":
                    self.refresh.clear()
            h.send_plain(200, "{}")
        else:
            h.send_plain(404, "Not Found", "text/plain")

    def delete(self, h):
        if self._bearer(h):
            self.mcp.delete(h)

    def other(self, h):
        h.send_plain(405, "Method Not Allowed", "text/plain")

    @staticmethod
    def _split(h):
        parts = urllib.parse.urlsplit(h.path)
        return parts.path, dict(urllib.parse.parse_qsl(parts.query))

    # ------------------------------------------------------------ the resource server
    def _bearer(self, h):
        scheme, _, token = (h.headers.get("authorization") or "").partition(" ")
        with self.lock:
            ok = scheme.lower() == "bearer" and self.access.get(token) == self.resource(h)
            self.stats["bearer_requests" if ok else "unauthorized"] += 1
        if not ok:
            h.body()
            meta = self.origin(h) + "/.well-known/oauth-protected-resource/mcp"
            h.send_plain(401, json.dumps({"error": "invalid_token"}), headers=[
                ("WWW-Authenticate", f'Bearer error="invalid_token", resource_metadata="{meta}"')])
        return ok

    # ------------------------------------------------------------ the authorization server
    def _refuse(self, h, why, status=400, error="invalid_request"):
        with self.lock:
            self.stats["refused"].append(why)
        h.send_plain(status, json.dumps({"error": error, "error_description": why}))

    def _register(self, h):
        try:
            meta = json.loads(h.body())
        except ValueError:
            return self._refuse(h, "registration body is not JSON")
        uris = meta.get("redirect_uris")
        if not isinstance(uris, list) or not uris or not all(
                isinstance(u, str) and u.startswith("http://127.0.0.1:") for u in uris):
            return self._refuse(h, "redirect_uris must be loopback URLs", error="invalid_redirect_uri")
        if meta.get("token_endpoint_auth_method") != "none":
            return self._refuse(h, "only public clients", error="invalid_client_metadata")
        client_id = "client-" + secrets.token_hex(8)
        with self.lock:
            self.clients[client_id] = uris
            self.stats["registrations"] += 1
        h.send_plain(201, json.dumps({"client_id": client_id, "redirect_uris": uris,
                                      "token_endpoint_auth_method": "none",
                                      "grant_types": ["authorization_code", "refresh_token"]}))

    def _authorize(self, h, q):
        with self.lock:
            uris = self.clients.get(q.get("client_id"))
        checks = [(uris is not None, "unknown client_id"),
                  (uris is not None and q.get("redirect_uri") in uris, "redirect_uri not registered"),
                  (q.get("response_type") == "code", "response_type must be code"),
                  (q.get("code_challenge_method") == "S256", "PKCE S256 required"),
                  (len(q.get("code_challenge") or "") >= 43, "code_challenge missing"),
                  (bool(q.get("state")), "state missing"),
                  (q.get("resource") == self.resource(h), "resource must name the MCP server")]
        for ok, why in checks:
            if not ok:
                return self._refuse(h, why)
        code = secrets.token_urlsafe(16)
        with self.lock:
            self.codes[code] = dict(q)
            self.stats["authorizations"] += 1
        target = q["redirect_uri"] + "?" + urllib.parse.urlencode({"code": code, "state": q["state"]})
        h.send_plain(302, b"", kind=None, headers=[("Location", target)])

    def _token(self, h):
        form = dict(urllib.parse.parse_qsl(h.body().decode()))
        grant = form.get("grant_type")
        if form.get("resource") != self.resource(h):
            return self._refuse(h, f"{grant}: resource must name the MCP server", error="invalid_target")
        with self.lock:
            if grant == "authorization_code":
                asked = self.codes.pop(form.get("code"), None)
                if asked is None:
                    return self._refuse(h, "unknown or used code", error="invalid_grant")
                challenge = base64.urlsafe_b64encode(hashlib.sha256(
                    (form.get("code_verifier") or "").encode()).digest()).rstrip(b"=").decode()
                if challenge != asked["code_challenge"]:
                    return self._refuse(h, "PKCE verifier does not match", error="invalid_grant")
                if form.get("client_id") != asked["client_id"] or \
                        form.get("redirect_uri") != asked["redirect_uri"]:
                    return self._refuse(h, "client or redirect_uri differ", error="invalid_grant")
                client_id = asked["client_id"]
                self.stats["code_grants"] += 1
            elif grant == "refresh_token":
                known = self.refresh.pop(form.get("refresh_token"), None)
                if known is None or known[0] != form.get("client_id"):
                    return self._refuse(h, "refresh token refused", error="invalid_grant")
                client_id = known[0]
                self.stats["refresh_grants"] += 1
            else:
                return self._refuse(h, "unsupported grant", error="unsupported_grant_type")
            access, refresh = "at-" + secrets.token_hex(16), "rt-" + secrets.token_hex(16)
            self.access[access] = self.resource(h)
            self.refresh[refresh] = (client_id, self.resource(h))
        h.send_plain(200, json.dumps({"access_token": access, "token_type": "Bearer",
                                      "expires_in": EXPIRES_IN, "refresh_token": refresh}),
                     headers=[("Cache-Control", "no-store")])


if __name__ == "__main__":
    mcp_fake.serve_http(OAuthApp())
    sys.stdout.flush()
    os._exit(0)
