"""The Gemini API (``--provider gemini``): ``models/{model}:streamGenerateContent``.

The key comes from ``GEMINI_API_KEY``, else ``GOOGLE_API_KEY``, and goes in the
``x-goog-api-key`` header (never in the URL, where logs and proxies would see it). The
body and the stream are ``gemini_wire.py``'s.

Caching: every request starts with the same bytes (the system instruction, then the tool
list, then the history in order), which the server's implicit cache reuses on its own.
With ``[providers.gemini] context_cache = "explicit"`` the session also keeps a
``cachedContents`` entry (``gemini_cache.py``) holding the system instruction, the tools
and the settled history; later requests name it (``cachedContent``) and send only what
came after it.

A bad key: the API answers HTTP 400 ``API_KEY_INVALID`` (not 401); it is reported as an
authentication failure naming ``GEMINI_API_KEY``.
"""

import logging
import os
from urllib.parse import quote

from term2acp.core import secrets
from term2acp.providers import gemini_wire as wire
from term2acp.providers.base import Provider, ProviderNotConfigured
from term2acp.providers.errors import AuthenticationFailed, ProviderHTTPError, scrub
from term2acp.providers.http import HTTPClient
from term2acp.providers.openai import is_loopback, sse_json

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"
KEY_VARS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
CONTEXT_CACHES = ("implicit", "explicit")
BAD_KEY_REASONS = ("API_KEY_INVALID", "API_KEY_SERVICE_BLOCKED")


def gemini_key(name, api_key, base_url, env):
    """``(key, hint)``: the configured key, else the environment's (built-in provider only)."""
    key, hint = api_key, f"{name}'s API key"
    if not key and name == "gemini":
        for var in KEY_VARS:
            if env.get(var):
                key, hint = env[var], var
                break
        else:
            hint = KEY_VARS[0]
    if key:
        try:
            key = secrets.clean(key, hint)
        except secrets.SecretInvalid as exc:
            raise ProviderNotConfigured(f"{name}: {exc}") from None
    elif not is_loopback(base_url):
        raise ProviderNotConfigured(f"{name}: no API key: set GEMINI_API_KEY (or GOOGLE_API_KEY)"
                                    if name == "gemini" else f"{name}: no API key configured")
    return key or "not-needed", hint


def bad_key(error):
    """Gemini's HTTP 400 for a key it does not accept."""
    return isinstance(error, ProviderHTTPError) and error.status == 400 \
        and error.code in BAD_KEY_REASONS


class GeminiProvider(Provider):
    name = "gemini"

    def __init__(self, name="gemini", api_key=None, base_url=None, timeout=600.0, max_retries=2,
                 headers=None, connect_timeout=15.0, context_cache=None, env=None):
        self.name = name
        env = os.environ if env is None else env
        self.base_url = base_url or (env.get("GEMINI_BASE_URL") if name == "gemini" else None) \
            or DEFAULT_BASE_URL
        self._api_key, self._key_hint = gemini_key(name, api_key, self.base_url, env)
        if context_cache not in (None, *CONTEXT_CACHES):
            raise ProviderNotConfigured(f'{name}: context_cache must be "implicit" or '
                                        f'"explicit", not {context_cache!r}')
        self._client = HTTPClient(self.base_url, {"x-goog-api-key": self._api_key,
                                                  **(headers or {})},
                                  name, self._key_hint, self._api_key,
                                  connect_timeout=connect_timeout, read_timeout=timeout,
                                  max_retries=max_retries)
        self.caches = None
        if context_cache == "explicit":
            from term2acp.providers.gemini_cache import ContextCaches

            self.caches = ContextCaches(self._client, name)

    def close(self):
        if self.caches is not None:
            self.caches.close()
        self._client.close()

    def list_models(self, timeout=10.0):
        """The models that generate content, as ``models?pageSize=1000`` lists them."""
        body = self._client.get_json("/models?pageSize=1000", timeout)
        out = []
        for model in (body.get("models") if isinstance(body, dict) else None) or ():
            if not isinstance(model, dict) or not isinstance(model.get("name"), str):
                continue
            if "generateContent" in (model.get("supportedGenerationMethods") or ()):
                out.append(model["name"].removeprefix("models/"))
        return out

    def stream(self, request):
        return self._stream(request)

    def _stream(self, request):
        body = wire.request_body(request)
        if self.caches is not None:
            body = self.caches.apply(request, body)
        path = f"/models/{quote(request.model, safe='')}:streamGenerateContent?alt=sse"
        try:
            yield from content_stream(self._client, self.name, path, body)
        except ProviderHTTPError as exc:
            if bad_key(exc):
                raise AuthenticationFailed(scrub(
                    f"{self.name}: the API key was refused (check {self._key_hint})",
                    self._api_key), exc.status, exc.code) from None
            raise


def content_stream(client, name, path, body):
    """The provider events of one ``streamGenerateContent`` request (also Vertex AI's)."""
    state, response = wire.StreamState(name), None
    try:
        response = yield from client.stream(path, body)
        for chunk in sse_json(client, response, name):
            if isinstance(chunk, dict) and chunk.get("error"):
                raise client.status_error(200, chunk, "the server reported an error")
            yield from state.feed(chunk)
        yield from state.finish_events()
    finally:
        if response is not None:
            response.close()
