"""The model catalog and non-interactive model resolution.

Resolution never asks. ``--model`` is an id or ``<provider>/<model>``; an id the catalog
knows (case-insensitive) names its provider, and any other id passes through unchanged
to the provider that can serve it: the one given with ``--provider`` or in the config
file, an OpenAI-compatible server (``OPENAI_BASE_URL``), or the one whose naming the id
follows (``claude-*``: Anthropic; ``gpt-*``, ``o3``...: OpenAI). The provider then accepts
the id or fails the turn with its own message. The catalog supplies what it knows of a
model (window, images, efforts) and family defaults for the rest; the model config option adds
what the provider's models endpoint lists (sessions/config_options.py). Provider modules are
imported only when a provider instance is created.
"""

import importlib.util
import re
from typing import NamedTuple

from term2acp.providers.errors import ProviderNotConfigured
from term2acp.providers.options import api_options, construct, http_options


_SNAPSHOT = re.compile(r"-\d{8}$")


class CatalogError(ValueError):
    pass


class ModelInfo(NamedTuple):
    id: str
    provider: str
    context_window: int | None
    reasoning: bool | None = False  # None: unknown (ids the catalog only hosts)
    images: bool | None = False  # accepts image input; None: unknown


BUILTIN_PROVIDERS = {
    # id: (label, factory, default model, key variable)
    "openai": ("OpenAI or any OpenAI-compatible server (OPENAI_BASE_URL)",
               "term2acp.providers.openai:OpenAIProvider", "gpt-5.2", "OPENAI_API_KEY"),
    "anthropic": ("Anthropic Messages API", "term2acp.providers.anthropic:AnthropicProvider",
                  "claude-sonnet-5", "ANTHROPIC_API_KEY"),
    "local": ("GGUF model in process (xllamacpp, extra [local]; or llama-cpp-python)",
              "term2acp.providers.local:LocalProvider", "smollm2-135m-instruct", None),
    "scripted": ("scripted model turns from TERM2ACP_SCRIPT (tests, demos)",
                 "term2acp.providers.scripted:ScriptedProvider", "scripted", "TERM2ACP_SCRIPT"),
    "gemini": ("Google Gemini API (GEMINI_API_KEY or GOOGLE_API_KEY)",
               "term2acp.providers.gemini:GeminiProvider", "gemini-2.5-pro", "GEMINI_API_KEY"),
    # The cloud providers are chosen with --provider (or the config file), never guessed:
    # their credentials (AWS, Google Cloud, Azure) are often in the environment for other work.
    "bedrock": ("Amazon Bedrock (AWS credentials: AWS_PROFILE, AWS_ACCESS_KEY_ID...)",
                "term2acp.providers.bedrock:BedrockProvider",
                "us.anthropic.claude-sonnet-4-5-20250929-v1:0", None),
    "vertex": ("Google Vertex AI (GOOGLE_CLOUD_PROJECT, application-default credentials)",
               "term2acp.providers.vertex:VertexProvider", "gemini-2.5-pro", None),
    "azure": ("Azure OpenAI (AZURE_OPENAI_ENDPOINT, AZURE_OPENAI_API_KEY; --model names the "
              "deployment)", "term2acp.providers.azure:AzureProvider", None, None),
}
# what a credential-less check asks of the cloud providers (configured())
CLOUD_SIGNS = {"bedrock": ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                           "AWS_WEB_IDENTITY_TOKEN_FILE"),
               "vertex": ("GOOGLE_CLOUD_PROJECT",),
               "azure": ("AZURE_OPENAI_ENDPOINT",)}
CLOUD = tuple(CLOUD_SIGNS)

BUILTIN_MODELS = (
    ModelInfo("gpt-5.2", "openai", 400_000, True, True),
    ModelInfo("gpt-5.1", "openai", 400_000, True, True),
    ModelInfo("gpt-4.1", "openai", 1_047_576, False, True),
    ModelInfo("gpt-4.1-mini", "openai", 1_047_576, False, True),
    ModelInfo("gpt-4o", "openai", 128_000, False, True),
    ModelInfo("gpt-4o-mini", "openai", 128_000, False, True),
    ModelInfo("o4-mini", "openai", 200_000, True, True),
    ModelInfo("gpt-5", "openai", 400_000, True, True),
    ModelInfo("gpt-5-mini", "openai", 400_000, True, True),
    ModelInfo("gpt-5-nano", "openai", 400_000, True, True),
    ModelInfo("o3", "openai", 200_000, True, True),
    ModelInfo("claude-sonnet-5", "anthropic", 1_000_000, True, True),
    ModelInfo("claude-opus-5", "anthropic", 1_000_000, True, True),
    ModelInfo("claude-opus-4-5", "anthropic", 200_000, True, True),
    ModelInfo("claude-sonnet-4-5", "anthropic", 200_000, True, True),
    ModelInfo("claude-opus-4-1", "anthropic", 200_000, True, True),
    ModelInfo("claude-haiku-4-5", "anthropic", 200_000, True, True),
    ModelInfo("gemini-2.5-pro", "gemini", 1_048_576, True, True),
    ModelInfo("gemini-2.5-flash", "gemini", 1_048_576, True, True),
    ModelInfo("gemini-2.5-flash-lite", "gemini", 1_048_576, True, True),
    ModelInfo("gemini-3-pro-preview", "gemini", 1_048_576, True, True),
    ModelInfo("gemini-3-flash-preview", "gemini", 1_048_576, True, True),
    ModelInfo("smollm2-135m-instruct", "local", 8192),
    ModelInfo("scripted", "scripted", 128_000, True),
)


# An id the catalog does not know: the provider its naming follows, and what that family
# of models generally has (window, reasoning, images); the window is learned from the
# provider's overflow message when it is smaller (turns/context.py).
FAMILIES = (
    (re.compile(r"claude-"), "anthropic", 200_000, True, True),
    (re.compile(r"gemini-"), "gemini", 1_048_576, True, True),
    (re.compile(r"gpt-4|chatgpt"), "openai", 128_000, False, True),
    (re.compile(r"gpt-\d|o\d(-|$)|codex"), "openai", 400_000, True, True),
)


# How the clouds name the models of a family: Bedrock's ``us.anthropic.claude-...-v1:0``
# (a region's inference profile, the vendor, a version), Vertex's ``claude-...@20250929``.
_CLOUD_NAME = re.compile(r"^(?:(?:us|eu|apac|global|us-gov|jp|au|ca)\.)?"
                         r"(?:anthropic|amazon|meta|mistral|cohere|ai21|deepseek|openai|qwen)\.")
_CLOUD_SUFFIX = re.compile(r"(?:-v\d+(?::\d+)?|@\d{8}|@latest|@default)$")


def canonical(model):
    """A model id without the cloud's decorations: the id the price table and the
    families know (``us.anthropic.claude-sonnet-4-5-20250929-v1:0`` ->
    ``claude-sonnet-4-5-20250929``; ``claude-opus-4-1@20250805`` -> ``claude-opus-4-1-20250805``)."""
    name = _CLOUD_SUFFIX.sub("", _CLOUD_NAME.sub("", model or ""))
    if "@" in (model or "") and "@" not in name:
        tail = (model or "").rsplit("@", 1)[1]
        if tail.isdigit():
            name = f"{name}-{tail}"
    return name


def family(model):
    """``(provider, window, reasoning, images)`` of the family ``model`` belongs to."""
    name = canonical(model).lower()
    for pattern, provider, window, reasoning, images in FAMILIES:
        if pattern.match(name):
            return provider, window, reasoning, images
    return None


class Catalog:
    def __init__(self, settings):
        self.settings = settings
        self.env = settings.env
        self.custom = dict(settings.providers)
        self.models = list(BUILTIN_MODELS)
        for name, cfg in self.custom.items():
            for model in cfg.get("models") or ():
                if isinstance(model, str):
                    self.models.append(ModelInfo(model, name, cfg.get("context_window"),
                                                 cfg.get("reasoning"), cfg.get("images")))

    # ------------------------------------------------------------ providers
    def provider_ids(self):
        return list(BUILTIN_PROVIDERS) + [n for n in self.custom if n not in BUILTIN_PROVIDERS]

    def describe_providers(self):
        rows = []
        for pid in self.provider_ids():
            if pid in BUILTIN_PROVIDERS:
                rows.append((pid, BUILTIN_PROVIDERS[pid][0]))
            else:
                rows.append((pid, f"{self.custom[pid].get('type', 'openai')}-compatible (config file)"))
        return rows

    def passthrough(self, provider):
        """True when ``provider`` can host model ids the catalog does not know (every
        provider but the local one: its models are files)."""
        return provider in self.custom or provider in ("scripted", "openai", "anthropic",
                                                       "gemini", *CLOUD)

    def default_model(self, provider):
        if provider in self.custom and provider not in BUILTIN_PROVIDERS:
            models = self.custom[provider].get("models") or []
            return models[0] if models else None
        if provider == "azure":  # a deployment: the user's own name for it
            deployments = list((self.custom.get("azure") or {}).get("deployments") or ())
            return self.env.get("AZURE_OPENAI_DEPLOYMENT") or next(iter(deployments), None)
        return BUILTIN_PROVIDERS[provider][2]

    # ------------------------------------------------------------ resolution
    def resolve(self, provider=None, model=None):
        """``(provider, model)`` from flags or settings; ``(None, None)`` if nothing is usable."""
        if provider is not None and provider not in self.provider_ids():
            raise CatalogError(f'unknown provider "{provider}".')
        if model is None:
            if provider is None:
                return self._default()
            if provider == "azure" and not self.default_model(provider):
                raise CatalogError("azure: name the deployment: --model <deployment> (or "
                                   "AZURE_OPENAI_DEPLOYMENT, or [providers.azure] deployments)")
            return provider, self.default_model(provider)
        return self._resolve_model(model, provider)

    def configured(self, provider):
        """A provider that could be used now (a key, a server, a script or the local model)."""
        if provider in self.custom and provider not in BUILTIN_PROVIDERS:
            return True
        if provider == "local":
            return self.local_available()
        if provider == "openai" and self.env.get("OPENAI_BASE_URL"):
            return True
        if provider == "gemini":
            return bool(self.env.get("GEMINI_API_KEY") or self.env.get("GOOGLE_API_KEY"))
        if provider in CLOUD_SIGNS:
            return any(self.env.get(var) for var in CLOUD_SIGNS[provider]) \
                or bool((self.custom.get(provider) or {}).get("endpoint")
                        or (self.custom.get(provider) or {}).get("project"))
        entry = BUILTIN_PROVIDERS.get(provider)
        return bool(entry and entry[3] and self.env.get(entry[3]))

    def _hosting(self):
        """Without --provider, the OpenAI-compatible server that hosts ids the catalog does
        not know (OpenRouter-style ``vendor/model`` ids pass through unchanged), or None."""
        chosen = self.settings.provider
        if chosen and chosen != "scripted" and self.passthrough(chosen):
            return chosen
        return "openai" if self.env.get("OPENAI_BASE_URL") else None

    def _resolve_model(self, model, provider):
        if provider is None and "/" in model:
            prefix, rest = model.split("/", 1)
            # A prefix is a provider only when it names a configured one.
            if prefix in self.provider_ids() and rest and self.configured(prefix):
                host = self._hosting()
                if host is not None and not any(m.id.lower() == model.lower() for m in self.models):
                    raise CatalogError(
                        f'"{model}" is ambiguous: pass --provider {prefix} --model {rest} '
                        f"(the {prefix} provider), or --provider {host} --model {model} (the "
                        "id as the OpenAI-compatible server names it).")
                provider, model = prefix, rest
        candidates = [m for m in self.models if m.id.lower() == model.lower()
                      and (provider is None or m.provider == provider)]
        if len(candidates) == 1:
            return candidates[0].provider, candidates[0].id
        if len(candidates) > 1:
            raise CatalogError(f'cannot resolve --model "{model}" non-interactively; pass an exact '
                               "model id or <provider>/<model>.")
        if provider is not None and self.passthrough(provider):
            return provider, model
        if provider is None and self._hosting() is not None:
            return self._hosting(), model  # an id the server knows, passed through unchanged
        guessed = family(model) if provider is None else None
        if guessed is not None:
            return guessed[0], model  # a model newer than the catalog: the provider decides
        where = f" for provider {provider}" if provider else ""
        known = ", ".join(sorted(m.id for m in self.models
                                 if provider is None or m.provider == provider))
        raise CatalogError(f'No models match "{model}"{where}, and its provider cannot be '
                           f"told from its name: pass --provider (openai, anthropic or one "
                           f"of the config file). Known models: {known}.")

    def _default(self):
        if self.settings.provider or self.settings.model:
            return self.resolve(self.settings.provider, self.settings.model)
        for pid, (_label, _factory, model, key) in BUILTIN_PROVIDERS.items():
            if key and self.env.get(key):
                return pid, model
        if self.env.get("OPENAI_BASE_URL"):
            return "openai", BUILTIN_PROVIDERS["openai"][2]
        if self.local_available():
            return "local", BUILTIN_PROVIDERS["local"][2]
        return None, None

    def local_available(self):
        """The offline default: a local engine importable and a GGUF model at hand.

        ``TERM2ACP_LOCAL_MODEL=off`` opts out of it.
        """
        configured = self.env.get("TERM2ACP_LOCAL_MODEL")
        if configured and configured.lower() in ("off", "none", "0"):
            return False
        if not any(importlib.util.find_spec(m) for m in ("xllamacpp", "llama_cpp")):
            return False
        if configured:
            return True
        from term2acp.providers.gguf import default_model

        return default_model(self.env) is not None

    def info(self, provider, model):
        """What the catalog knows of a model; the config file's top-level
        ``context_window`` and ``images`` override it."""
        found = next((m for m in self.models if m.provider == provider and m.id == model), None)
        if found is None and provider in CLOUD:  # the model the cloud serves, as we know it
            served = canonical(((self.custom.get(provider) or {}).get("deployments")
                                or {}).get(model, model))
            known = next((m for m in self.models if m.id == served
                          or m.id == _SNAPSHOT.sub("", served)), None)
            if known is not None:
                found = known._replace(id=model, provider=provider)
        if found is None:
            cfg = self.custom.get(provider) or {}
            known = family(model) if provider in ("openai", "anthropic", "gemini", *CLOUD) \
                else None
            found = ModelInfo(model, provider, cfg.get("context_window"), None,
                              cfg.get("images"))
            if known is not None and (known[0] == provider or provider in CLOUD):
                found = ModelInfo(model, provider, cfg.get("context_window") or known[1],
                                  known[2], known[3] if cfg.get("images") is None
                                  else cfg.get("images"))
        window = self.settings.context_window
        images = self.settings.images
        if window:
            found = found._replace(context_window=window)
        if images is not None:
            found = found._replace(images=images)
        return found

    def accepts_images(self, provider=None, model=None):
        """Whether the default (or given) model takes image input."""
        if provider is None:
            try:
                provider, model = self.resolve(self.settings.provider, self.settings.model)
            except CatalogError:
                return False
        return bool(provider and self.info(provider, model).images)

    # ------------------------------------------------------------ instances
    def provider_module(self):
        """The module of the default provider's class (what its first prompt imports), or
        None when no provider is usable."""
        try:
            provider, _model = self.resolve(self.settings.provider, self.settings.model)
        except CatalogError:
            return None
        if provider in self.custom and provider not in BUILTIN_PROVIDERS:
            provider = "anthropic" if self.custom[provider].get("type") == "anthropic" else "openai"
        entry = BUILTIN_PROVIDERS.get(provider)
        return entry[1].partition(":")[0] if entry else None

    def create(self, provider):
        """A provider instance; raises ProviderNotConfigured with what to set."""
        if provider == "scripted":
            return construct(BUILTIN_PROVIDERS[provider][1],
                              script_path=self.settings.script or self.env.get("TERM2ACP_SCRIPT"))
        cfg = self.custom.get(provider) or {}
        if provider in self.custom and provider not in BUILTIN_PROVIDERS:
            kind = cfg.get("type", "openai")
            factory = BUILTIN_PROVIDERS["anthropic" if kind == "anthropic" else "openai"][1]
            key_env = cfg.get("api_key_env")
            api_key = self.env.get(key_env) if key_env else cfg.get("api_key")
            # A loopback server without a key gets the provider's placeholder key.
            return construct(factory, name=provider, api_key=api_key, base_url=cfg.get("base_url"),
                              **http_options(cfg), **api_options(kind, cfg))
        if provider not in BUILTIN_PROVIDERS:
            raise ProviderNotConfigured(f'unknown provider "{provider}"')
        factory = BUILTIN_PROVIDERS[provider][1]
        if provider == "local":
            return construct(factory, settings=self.settings)
        if provider == "gemini" or provider in CLOUD:  # their own credentials and options
            return construct(factory, name=provider, env=self.env, **http_options(cfg),
                              **api_options(provider, cfg))
        # [providers.openai] / [providers.anthropic] tune the built-in ones
        prefix = provider.upper()
        return construct(factory, name=provider, api_key=self.env.get(f"{prefix}_API_KEY"),
                          base_url=self.env.get(f"{prefix}_BASE_URL"), **http_options(cfg),
                          **api_options(provider, cfg))


NO_PROVIDER_HELP = (
    "No model provider is configured. Set one of: OPENAI_API_KEY (optionally OPENAI_BASE_URL "
    "for Ollama, vLLM, llama.cpp server, LM Studio, OpenRouter), ANTHROPIC_API_KEY, "
    "GEMINI_API_KEY, or pass --provider bedrock, vertex or azure with their cloud's "
    "credentials, or install "
    "the offline model with pip install 'term2acp[local]' and term2-acp --install-model; or pass --provider/--model, or set "
    "provider and model in " + "$XDG_CONFIG_HOME/term2acp/config.toml.")

