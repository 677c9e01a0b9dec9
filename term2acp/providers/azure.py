"""Azure OpenAI (``--provider azure``): OpenAI's APIs on a resource's own endpoint.

* ``AZURE_OPENAI_ENDPOINT`` (or ``[providers.azure] endpoint``): the resource,
  ``https://<resource>.openai.azure.com``;
* ``--model`` names the **deployment** (the user's name for a model on the resource), sent
  where OpenAI sends the model;
* the key goes in the ``api-key`` header (``AZURE_OPENAI_API_KEY``), or an Entra ID token
  as ``Authorization: Bearer`` (``AZURE_OPENAI_AD_TOKEN``);
* ``AZURE_OPENAI_API_VERSION`` (or ``api_version``): ``v1`` by default, the
  version-less ``/openai/v1/...`` routes; a dated version (``2025-04-01-preview``) uses
  ``/openai/responses?api-version=...`` and
  ``/openai/deployments/<deployment>/chat/completions?api-version=...``;
* the Responses API by default (``api = "chat"`` for deployments of models without it),
  stateless (``store: false``) with the encrypted reasoning carried, and the session's
  ``prompt_cache_key``.

Prices follow the model the deployment serves: the ``[providers.azure] deployments``
mapping when it names it, else the model the response names.
"""

import os
from urllib.parse import quote, urlsplit

from term2acp.core import secrets
from term2acp.providers import compat
from term2acp.providers.base import ProviderNotConfigured, Usage
from term2acp.providers.http import HTTPClient
from term2acp.providers.openai import OpenAIProvider

DEFAULT_API_VERSION = "v1"


class AzureProvider(OpenAIProvider):
    name = "azure"

    def __init__(self, name="azure", env=None, endpoint=None, api_version=None, api=None,
                 deployments=None, base_url=None, timeout=600.0, max_retries=2, headers=None,
                 connect_timeout=15.0):
        env = os.environ if env is None else env
        self.name = name
        endpoint = (endpoint or base_url or env.get("AZURE_OPENAI_ENDPOINT") or "").rstrip("/")
        if not endpoint:
            raise ProviderNotConfigured(f"{name}: no endpoint: set AZURE_OPENAI_ENDPOINT "
                                        "(https://<resource>.openai.azure.com)")
        if urlsplit(endpoint).scheme not in ("http", "https"):
            raise ProviderNotConfigured(f"{name}: AZURE_OPENAI_ENDPOINT must start with https://")
        endpoint = endpoint.removesuffix("/openai/v1").removesuffix("/openai")
        self.version = api_version or env.get("AZURE_OPENAI_API_VERSION") or DEFAULT_API_VERSION
        self.deployments = dict(deployments or {})
        if api not in (None, *self.APIS):
            raise ProviderNotConfigured(f'{name}: api must be "responses" or "chat", not {api!r}')
        self.base_url = endpoint + ("/openai/v1" if self.version == "v1" else "/openai")
        self._host = urlsplit(endpoint).netloc
        self.server = compat.Server(self.base_url, api or "responses", True)
        auth, self._key_hint, self._api_key = _credentials(name, env)
        self._client = HTTPClient(self.base_url, {**auth, **(headers or {})}, name,
                                  self._key_hint, self._api_key, connect_timeout=connect_timeout,
                                  read_timeout=timeout, max_retries=max_retries)

    def path(self, api, request):
        if self.version == "v1":
            return super().path(api, request)
        query = f"?api-version={quote(self.version, safe='')}"
        if api == "responses":
            return "/responses" + query
        return f"/deployments/{quote(request.model, safe='')}/chat/completions" + query

    def list_models(self, timeout=10.0):
        """The resource's deployments are not listed with a key: the configured ones."""
        return list(self.deployments)

    def _stream(self, request, path, params, state):
        served = self.deployments.get(request.model)
        for item in super()._stream(request, path, params, state):
            if type(item) is Usage:
                item.model = served or getattr(state, "model", None)
            yield item


def _credentials(name, env):
    """``(headers, hint, secret)``: the key in ``api-key``, or an Entra ID bearer token."""
    for var, header, prefix in (("AZURE_OPENAI_API_KEY", "api-key", ""),
                                ("AZURE_OPENAI_AD_TOKEN", "Authorization", "Bearer ")):
        value = env.get(var)
        if value:
            try:
                value = secrets.clean(value, var)
            except secrets.SecretInvalid as exc:
                raise ProviderNotConfigured(f"{name}: {exc}") from None
            return {header: prefix + value}, var, value
    raise ProviderNotConfigured(f"{name}: no credential: set AZURE_OPENAI_API_KEY (or "
                                "AZURE_OPENAI_AD_TOKEN for an Entra ID token)")
