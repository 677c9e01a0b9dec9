"""How a provider instance is made from its config section (``catalog.py`` says which)."""

import importlib

from term2acp.providers.errors import ProviderNotConfigured

CLOUD_EXTRAS = ("bedrock", "vertex")  # providers whose cloud library is an extra


def api_options(kind, cfg):
    """A provider's API settings from its config section: Anthropic ``prompt_cache``
    (breakpoints on, the default) and ``cache_ttl`` ("5m" or "1h"); OpenAI ``api``
    ("responses" or "chat"; default: responses on the official endpoint, chat elsewhere)
    and ``prompt_cache_key`` (send the session id as the cache key; default: on the
    official endpoint only)."""
    names = API_OPTIONS.get(kind, ("api", "prompt_cache_key"))
    return {name: cfg[name] for name in names if name in cfg}


# the options each kind of provider takes from its config section
API_OPTIONS = {"anthropic": ("prompt_cache", "cache_ttl"),
               "gemini": ("context_cache",),
               "bedrock": ("region", "prompt_cache", "base_url"),
               "vertex": ("project", "location", "prompt_cache", "cache_ttl", "context_cache",
                          "base_url"),
               "azure": ("endpoint", "api_version", "api", "deployments", "base_url")}


def http_options(cfg):
    """Optional transport settings of a configured provider: ``headers`` (a table of
    strings), ``timeout`` (read, seconds), ``connect_timeout`` and ``max_retries``."""
    options = {}
    headers = cfg.get("headers")
    if isinstance(headers, dict):
        options["headers"] = {str(k): str(v) for k, v in headers.items()}
    for key, kind in (("timeout", float), ("connect_timeout", float), ("max_retries", int)):
        value = cfg.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
            options[key] = kind(value)
    return options


def construct(factory, **kwargs):
    module_name, _, attr = factory.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        extra = module_name.rsplit(".", 1)[1] if module_name.endswith(CLOUD_EXTRAS) else "openai"
        raise ProviderNotConfigured(f"{module_name} is not available ({exc}); install the "
                                    f"matching extra: pip install 'term2acp[{extra}]'") from None
    return getattr(module, attr)(**kwargs)
