"""Google Vertex AI (``--provider vertex``): Gemini and Anthropic models in a Google Cloud
project.

* project and region from ``GOOGLE_CLOUD_PROJECT`` and ``GOOGLE_CLOUD_LOCATION`` (or the
  ``[providers.vertex]`` section's ``project`` and ``location``); the endpoint is
  ``https://<location>-aiplatform.googleapis.com`` (``aiplatform.googleapis.com`` for
  ``global``), or ``base_url``;
* Gemini models: ``publishers/google/models/{model}:streamGenerateContent`` with the
  Gemini API's body and stream (``gemini_wire.py``), and its explicit context cache with
  ``context_cache = "explicit"``;
* Anthropic models (``claude-*``): ``publishers/anthropic/models/{model}:streamRawPredict``
  with the Anthropic provider's body (its ``cache_control`` breakpoints and thinking)
  less ``model``, plus ``anthropic_version: vertex-2023-10-16``, and its event stream;
* a bearer token from application-default credentials (google-auth: the
  ``GOOGLE_APPLICATION_CREDENTIALS`` file of any kind, gcloud's ADC file, the metadata
  server), refreshed before it expires. google-auth fetches tokens through our own HTTP
  client (``_Transport``), so proxies and CA settings work as for every provider.

google-auth is the ``[vertex]`` extra, imported only by this module, which is imported only
when a session uses Vertex AI.
"""

import os
from urllib.parse import quote, urlsplit

import google.auth
import google.auth.exceptions
import google.auth.transport
# what google.auth.default loads for the usual ADC files: imported with this module (in
# the background at start-up when Vertex AI is the default provider), not at the first request
import google.oauth2.credentials  # noqa: F401
import google.oauth2.service_account  # noqa: F401
import gevent
from gevent.lock import Semaphore

from term2acp.providers import gemini_wire
from term2acp.providers.anthropic import CACHE_TTLS, message_params, messages_stream
from term2acp.providers.base import Provider, ProviderNotConfigured
from term2acp.providers.errors import AuthenticationFailed, ProviderError
from term2acp.providers.gemini import content_stream
from term2acp.providers.http import HTTPClient

SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
KEY_HINT = "GOOGLE_APPLICATION_CREDENTIALS, or run gcloud auth application-default login"
ANTHROPIC_VERSION = "vertex-2023-10-16"


class VertexProvider(Provider):
    name = "vertex"

    def __init__(self, name="vertex", env=None, project=None, location=None, prompt_cache=True,
                 cache_ttl=None, context_cache=None, base_url=None, timeout=600.0,
                 max_retries=2, headers=None, connect_timeout=15.0):
        env = os.environ if env is None else env
        self.name = name
        self.project = env.get("GOOGLE_CLOUD_PROJECT") or project
        self.location = env.get("GOOGLE_CLOUD_LOCATION") or location
        if not self.project:
            raise ProviderNotConfigured(f"{name}: no Google Cloud project: set "
                                        "GOOGLE_CLOUD_PROJECT (or [providers.vertex] project)")
        if not self.location:
            raise ProviderNotConfigured(f"{name}: no region: set GOOGLE_CLOUD_LOCATION (e.g. "
                                        "us-east5 or global; or [providers.vertex] location)")
        if cache_ttl not in (None, *CACHE_TTLS):
            raise ProviderNotConfigured(f"{name}: cache_ttl must be one of "
                                        f"{', '.join(CACHE_TTLS)}, not {cache_ttl!r}")
        self.cache = None
        if prompt_cache is not False:
            self.cache = {"type": "ephemeral", **({"ttl": cache_ttl} if cache_ttl == "1h" else {})}
        host = "aiplatform.googleapis.com" if self.location == "global" \
            else f"{self.location}-aiplatform.googleapis.com"
        base = base_url or f"https://{host}"
        self._prefix = f"/v1/projects/{quote(self.project, safe='')}/locations/" \
                       f"{quote(self.location, safe='')}"
        self._client = HTTPClient(base + self._prefix, dict(headers or {}), name, KEY_HINT,
                                  None, connect_timeout=connect_timeout, read_timeout=timeout,
                                  max_retries=max_retries, sign=self._sign)
        self._credentials, self._lock = None, Semaphore()
        self._publishers = HTTPClient(base + "/v1beta1/publishers", dict(headers or {}), name,
                                      KEY_HINT, None, connect_timeout=connect_timeout,
                                      sign=self._sign)
        self._transport = _Transport(name, connect_timeout)
        self.caches = None
        if context_cache == "explicit":
            from term2acp.providers.gemini_cache import ContextCaches

            self.caches = ContextCaches(self._client, name, model_name=self._model_name)

    def _model_name(self, model):
        return f"projects/{self.project}/locations/{self.location}/publishers/google/models/{model}"

    def close(self):
        if self.caches is not None:
            self.caches.close()
        self._client.close()

    def list_models(self, timeout=10.0):
        """Google's Gemini models and Anthropic's Claude models in Model Garden."""
        out = []
        for publisher, family in (("google", "gemini-"), ("anthropic", "claude-")):
            body = self._publishers.call("GET", f"/{publisher}/models?pageSize=1000", None,
                                         timeout)
            for model in (body or {}).get("publisherModels") or ():
                name = model.get("name") if isinstance(model, dict) else None
                if isinstance(name, str) and name.rsplit("/", 1)[-1].startswith(family):
                    out.append(name.rsplit("/", 1)[-1])
        return out

    # ------------------------------------------------------------ credentials
    def _token(self):
        with self._lock:  # one refresh at a time; the others wait for its token
            try:
                if self._credentials is None:  # reads files, parses keys: off the hub
                    self._credentials, _project = gevent.get_hub().threadpool.apply(
                        google.auth.default, kwds={"scopes": SCOPES, "request": self._transport})
                if not self._credentials.valid:
                    self._credentials.refresh(self._transport)
            except google.auth.exceptions.DefaultCredentialsError:
                raise ProviderNotConfigured(f"{self.name}: no Google Cloud credentials: set "
                                            f"{KEY_HINT}") from None
            except google.auth.exceptions.GoogleAuthError as exc:
                raise AuthenticationFailed(f"{self.name}: the credentials were refused "
                                           f"({_short(exc)}); check {KEY_HINT}", 401) from None
            return self._credentials

    def _sign(self, method, url, body, headers):
        credentials = self._token()
        signed = {"Authorization": f"Bearer {credentials.token}"}
        quota = getattr(credentials, "quota_project_id", None)
        if quota:
            signed["x-goog-user-project"] = quota
        return signed

    # ------------------------------------------------------------ requests
    def stream(self, request):
        model = quote(request.model, safe="@")  # as Vertex AI writes its versions
        if request.model.startswith("claude"):
            params = message_params(request, self.cache)
            params.pop("model")
            params["anthropic_version"] = ANTHROPIC_VERSION
            return messages_stream(self._client, self.name,
                                   f"/publishers/anthropic/models/{model}:streamRawPredict",
                                   params)
        body = gemini_wire.request_body(request)
        if self.caches is not None:
            body = self.caches.apply(request, body)
        return content_stream(self._client, self.name,
                              f"/publishers/google/models/{model}:streamGenerateContent?alt=sse",
                              body)


class _Response:
    def __init__(self, status, headers, data):
        self.status, self.headers, self.data = status, headers, data


class _Transport(google.auth.transport.Request):
    """google-auth's requests (token refreshes, the metadata server) through our client."""

    def __init__(self, label, connect_timeout):
        self.label, self.connect_timeout = label, connect_timeout

    def __call__(self, url, method="GET", body=None, headers=None, timeout=None, **kwargs):
        parts = urlsplit(url)
        client = HTTPClient(f"{parts.scheme}://{parts.netloc}", {}, self.label, KEY_HINT, None,
                            connect_timeout=min(self.connect_timeout, timeout or 30.0))
        if isinstance(body, str):
            body = body.encode()
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        try:
            status, _reason, answer, data = client.exchange(method, path, body,
                                                            dict(headers or {}), timeout or 30.0)
        except ProviderError as exc:
            raise google.auth.exceptions.TransportError(str(exc)) from None
        return _Response(status, answer, data)


def _short(exc):
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
