"""OAuth 2.1 for remote MCP servers (the MCP authorization spec), the HTTP half.

A server that wants a sign-in answers 401 with ``WWW-Authenticate: Bearer
resource_metadata="..."``. :func:`discover` reads that protected resource metadata (RFC
9728; without the parameter, the well-known path under the server's path, then at its
root), takes its first authorization server and reads that server's metadata (RFC 8414,
then OpenID discovery, at each of the well-known places the spec lists), checked with
authlib's ``AuthorizationServerMetadata`` (https except loopback, the issuer the one asked
for) and for PKCE S256. :func:`register` registers us dynamically (RFC 7591) as a public
client with a loopback redirect; ``signin.py`` builds the authorization URL (PKCE S256,
``state``, RFC 8707 ``resource``) and takes the code; :func:`exchange` and
:class:`Credentials` get and refresh tokens (``resource`` on every token request).

authlib supplies the OAuth parts (metadata checks, PKCE, the authorization URL, token
requests and responses); the requests go through the MCP transports' HTTP client (the
providers' proxy and CA settings), cooperatively. authlib is imported on the first sign-in
or refresh: most sessions never need it. No token, code or client secret is logged.
"""

import json
import logging
import re
import time
import urllib.parse

import gevent.lock

from term2acp.mcp import tokens
from term2acp.mcp.rpc import McpError

log = logging.getLogger(__name__)

HTTP_TIMEOUT = 15.0
BODY_CAP = 1 << 20
REFRESH_MARGIN = 60.0  # refresh this long before the access token expires
CLIENT_NAME = "term2acp"
_PARAM = re.compile(r'([A-Za-z_][A-Za-z0-9_-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))')


class SignInNeeded(McpError):
    """The server needs a (new) sign-in: no token, or one the server and the refresh refused.
    ``challenge`` is the 401's WWW-Authenticate header, when there was one."""

    def __init__(self, message, challenge=""):
        super().__init__(message)
        self.challenge = challenge


class OAuthFailed(McpError):
    """Discovery, registration or a token request failed; the message says which, no secret."""


def challenge_params(header):
    """The parameters of a ``Bearer`` WWW-Authenticate challenge (lower-case names)."""
    scheme, _, rest = (header or "").strip().partition(" ")
    if scheme.lower() != "bearer":
        return {}
    return {m.group(1).lower(): m.group(2) if m.group(2) is not None else m.group(3)
            for m in _PARAM.finditer(rest)}


# ---------------------------------------------------------------- HTTP
def request(method, url, body=None, headers=None):
    """``(status, parsed JSON or None)``; raises OAuthFailed when the host cannot be reached."""
    from term2acp.mcp.dial import dial  # the network path (http.client): with the first sign-in

    conn, target = dial(url, HTTP_TIMEOUT)
    shown = _shown(url)
    try:
        with gevent.Timeout(HTTP_TIMEOUT, OAuthFailed(f"{shown} did not answer within "
                                                      f"{HTTP_TIMEOUT:g} s")):
            conn.request(method, target, body=body, headers={"Accept": "application/json",
                                                             **(headers or {})})
            response = conn.getresponse()
            data = response.read(BODY_CAP + 1)
    except (OSError, ValueError) as exc:
        raise OAuthFailed(f"{shown}: {type(exc).__name__}: {exc}") from None
    finally:
        conn.close()
    try:
        parsed = json.loads(data) if len(data) <= BODY_CAP else None
    except (ValueError, RecursionError):
        parsed = None
    return response.status, parsed


def _shown(url):
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


def _get_json(urls):
    """The first of ``urls`` that answers 200 with a JSON object: ``(url, object)``."""
    tried = []
    for url in urls:
        status, data = request("GET", url)
        if status == 200 and isinstance(data, dict):
            return url, data
        tried.append(f"{_shown(url)} (HTTP {status})")
    raise OAuthFailed("no metadata at " + ", ".join(tried))


# ---------------------------------------------------------------- discovery
def _well_known(url, name, suffix_too=False):
    parts = urllib.parse.urlsplit(url)
    path = parts.path.rstrip("/")
    base = f"{parts.scheme}://{parts.netloc}"
    urls = [f"{base}/.well-known/{name}{path}"] if path else []
    if suffix_too and path:
        urls.append(f"{base}{path}/.well-known/{name}")
    if not path or name == "oauth-protected-resource":
        urls.append(f"{base}/.well-known/{name}")
    return list(dict.fromkeys(urls))


def canonical(url):
    """The resource identifier of a server URL (RFC 8707): no fragment, lower-case scheme
    and host, no trailing slash."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((parts.scheme.lower(), parts.netloc.lower(),
                                    parts.path.rstrip("/"), parts.query, ""))


def _covers(resource, server_url):
    """True when the metadata's ``resource`` is the server's URL or a path above it."""
    resource, server = canonical(resource), canonical(server_url)
    return server == resource or server.startswith(resource + "/")


def discover(server_url, challenge=""):
    """``{"resource", "scope", "metadata"}`` for a server that answered 401 with ``challenge``."""
    from authlib.oauth2.rfc8414 import AuthorizationServerMetadata

    params = challenge_params(challenge)
    given = params.get("resource_metadata")
    urls = [urllib.parse.urljoin(server_url, given)] if given else \
        _well_known(server_url, "oauth-protected-resource")
    resource, scope, issuers = canonical(server_url), params.get("scope"), []
    try:
        _, prm = _get_json(urls)
    except OAuthFailed:
        if given:
            raise
        prm = {}  # a server of the 2025-03-26 spec: its own origin is the authorization server
        parts = urllib.parse.urlsplit(server_url)
        issuers = [f"{parts.scheme}://{parts.netloc}"]
    if prm:
        if not isinstance(prm.get("resource"), str) or not _covers(prm["resource"], server_url):
            raise OAuthFailed("the server's protected resource metadata names another resource")
        resource = prm["resource"]
        issuers = [a for a in prm.get("authorization_servers") or () if isinstance(a, str)]
        if not issuers:
            raise OAuthFailed("the server's protected resource metadata names no "
                              "authorization server")
        if scope is None and isinstance(prm.get("scopes_supported"), list):
            scope = " ".join(s for s in prm["scopes_supported"] if isinstance(s, str)) or None
    issuer = issuers[0]
    _, data = _get_json(_well_known(issuer, "oauth-authorization-server") +
                        _well_known(issuer, "openid-configuration", suffix_too=True))
    metadata = AuthorizationServerMetadata(data)
    try:
        metadata.validate()
    except ValueError as exc:
        raise OAuthFailed(f"the authorization server's metadata is not usable: {exc}") from None
    if canonical(data.get("issuer", "")) != canonical(issuer):
        raise OAuthFailed("the authorization server's metadata names another issuer")
    if "S256" not in (data.get("code_challenge_methods_supported") or ()):
        raise OAuthFailed("the authorization server does not offer PKCE with S256, which "
                          "sign-in requires")
    if not data.get("authorization_endpoint"):
        raise OAuthFailed("the authorization server has no authorization endpoint")
    return {"resource": resource, "scope": scope, "metadata": {
        k: data[k] for k in ("issuer", "authorization_endpoint", "token_endpoint",
                             "registration_endpoint") if isinstance(data.get(k), str)}}


def register(metadata, redirect_uri):
    """Dynamic client registration (RFC 7591) as a public client: the client information."""
    endpoint = metadata.get("registration_endpoint")
    if not endpoint:
        raise OAuthFailed("the authorization server offers no dynamic client registration")
    body = json.dumps({"client_name": CLIENT_NAME, "redirect_uris": [redirect_uri],
                       "grant_types": ["authorization_code", "refresh_token"],
                       "response_types": ["code"], "token_endpoint_auth_method": "none"})
    status, data = request("POST", endpoint, body.encode(), {"Content-Type": "application/json"})
    if status not in (200, 201) or not isinstance(data, dict) or \
            not isinstance(data.get("client_id"), str):
        raise OAuthFailed(f"the client registration was refused (HTTP {status}"
                          f"{_error_of(data)})")
    return {k: data[k] for k in ("client_id", "client_secret", "token_endpoint_auth_method")
            if isinstance(data.get(k), str)}


def _error_of(data):
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        return ": " + re.sub(r"[^\w .,:;()'-]", "", data["error"])[:100]
    return ""


# ---------------------------------------------------------------- tokens
def token_request(state, grant, **fields):
    """A token request (``authorization_code`` or ``refresh_token``) with ``resource``:
    the new token dict (``expires_at`` set), or raises OAuthFailed / SignInNeeded."""
    from authlib.oauth2.rfc6749 import OAuth2Token
    from authlib.oauth2.rfc6749.parameters import prepare_token_request

    client = state["client"]
    extra = {"client_id": client["client_id"], "resource": state["resource"], **fields}
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    secret = client.get("client_secret")
    if secret and client.get("token_endpoint_auth_method") == "client_secret_basic":
        import base64

        pair = f"{urllib.parse.quote(client['client_id'])}:{urllib.parse.quote(secret)}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    elif secret:
        extra["client_secret"] = secret
    body = prepare_token_request(grant, **extra)
    status, data = request("POST", state["metadata"]["token_endpoint"], body.encode(), headers)
    if status == 200 and isinstance(data, dict) and isinstance(data.get("access_token"), str):
        if str(data.get("token_type", "bearer")).lower() != "bearer":
            raise OAuthFailed("the authorization server issued a token that is not a bearer token")
        token = OAuth2Token.from_dict({k: v for k, v in data.items() if k in (
            "access_token", "refresh_token", "expires_in", "expires_at", "scope", "token_type")})
        return dict(token)
    if status in (400, 401) and isinstance(data, dict) and data.get("error") in (
            "invalid_grant", "invalid_client", "unauthorized_client"):
        raise SignInNeeded(f"the authorization server refused the {grant.replace('_', ' ')}"
                           f"{_error_of(data)}")
    raise OAuthFailed(f"the token request failed (HTTP {status}{_error_of(data)})")


class Credentials:
    """One server's stored sign-in, as the transport uses it: the bearer header (refreshed
    shortly before it expires), one refresh after a 401, and the file kept in step."""

    def __init__(self, data_dir, url):
        self.data_dir, self.url = data_dir, url
        self.state = tokens.load(data_dir, url)
        self.lock = gevent.lock.Semaphore()
        self.refreshes = 0

    @property
    def token(self):
        return (self.state or {}).get("token") or {}

    def header(self):
        """``Bearer <token>``, refreshed first when it expires within REFRESH_MARGIN; None
        without a token."""
        token = self.token
        if not token.get("access_token"):
            return None
        expires_at = token.get("expires_at")
        if isinstance(expires_at, (int, float)) and expires_at - REFRESH_MARGIN < time.time() \
                and token.get("refresh_token"):
            try:
                self.refresh(token["access_token"])
            except SignInNeeded:
                return None
            except OAuthFailed as exc:  # the old token may still work: the server decides
                log.info("mcp: token refresh failed: %s", exc)
        return f"Bearer {self.token['access_token']}" if self.token.get("access_token") else None

    def refresh(self, used):
        """Refresh unless someone did since ``used`` was read; True when a new token is in.
        Raises SignInNeeded when the refresh token is refused (the sign-in is dropped)."""
        with self.lock:
            token = self.token
            if token.get("access_token") != used:
                return bool(token.get("access_token"))
            if not token.get("refresh_token"):
                return False
            try:
                new = token_request(self.state, "refresh_token",
                                    refresh_token=token["refresh_token"])
            except SignInNeeded:
                self.state = {**self.state, "token": {}}
                tokens.save(self.data_dir, self.url, self.state)
                raise
            new.setdefault("refresh_token", token["refresh_token"])
            self.refreshes += 1
            self.state = {**self.state, "token": new}
            tokens.save(self.data_dir, self.url, self.state)
            return True

    def signed_in(self, state):
        """A new sign-in (``signin.py``): kept and saved."""
        self.state = state
        tokens.save(self.data_dir, self.url, state)

    def forget(self):
        self.state = None
        return tokens.delete(self.data_dir, self.url)
