"""The config file: TOML, checked against one schema that names every key.

A mistake in the file stops the agent at start-up (exit 1, a message on stderr naming the
file, the key and what is allowed): a key that is ignored or replaced by a default is
worse than no key, since ``mode = "readonly"`` would silently give the most permissive
mode. Broken TOML is reported with its line and column.

To add a key:

1. one field in the section's schema below (``ConfigSchema`` for top-level keys, or
   ``ShellSchema``, ``SandboxSchema``, ``McpSchema``, ``WebSearchSchema``, ``ProviderSchema`` (and
   ``BuiltinProviderSchema`` when the built-in providers take it), ``PriceSchema``; a new ``[table]``
   is a new schema nested in ``ConfigSchema``), built with the field makers of
   ``config_fields.py`` so a wrong type is refused with a clear message;
2. its default as an attribute of the same name on the settings object
   (``term2acp/settings.py``: ``Settings`` or the section's class), which the loaded value
   replaces (``ProviderSchema`` values stay a dict the catalog reads);
3. one line in README.rst's "Config file" example, with its default
   (``tests/unit/test_config_reference.py`` checks that the example and this schema list
   the same keys, and that the example loads).
"""

from marshmallow import RAISE, Schema, ValidationError, fields, post_load, validate

from term2acp.config_fields import Typed, count, mebibytes, seconds, switch, text, usd
from term2acp.core.option_values import EFFORTS, MODE_IDS
from term2acp.providers.catalog import BUILTIN_PROVIDERS

PROVIDER_TYPES = ("openai", "anthropic")


class ConfigError(ValueError):
    pass


class _StringList(fields.Field):
    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ValidationError("must be a list of non-empty strings, e.g. [\"a\", \"b\"]")
        return list(value)


class _StringTable(fields.Field):
    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise ValidationError('must be a table of strings, e.g. { X-Title = "term2acp" }')
        return dict(value)


class _Efforts(fields.Field):
    """``reasoning``: true, false, or the efforts the models support."""

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, bool):
            return value
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            wrong = [v for v in value if v not in EFFORTS]
            if not wrong:
                return list(value)
            raise ValidationError(f'"{wrong[0]}" is not an effort; use: {", ".join(EFFORTS)}')
        raise ValidationError(f"must be true, false or a list of efforts ({', '.join(EFFORTS)})")


# ------------------------------------------------------------------ the schema
UNKNOWN = "unknown key"  # completed by problems() with the keys the table takes


class Section(Schema):
    error_messages = {"unknown": UNKNOWN, "type": "must be a table"}

    class Meta:
        unknown = RAISE


class ShellSchema(Section):
    timeout = seconds()
    max_timeout = seconds()
    network = switch()
    max_processes = count()
    process_output_kb = count()


class SandboxSchema(Section):
    toolchains = _StringList()
    read_paths = _StringList()
    memory_mb = count()
    tmpfs_mb = count()


class _ToolChoice(fields.Field):
    """``[mcp] tools``: server name -> the tool names (or fnmatch patterns) it may offer."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, dict) or not all(
                isinstance(v, list) and all(isinstance(p, str) and p for p in v)
                for v in value.values()):
            raise ValidationError('must be a table of lists of tool names, e.g. '
                                  '{ github = ["search_code", "get_*"] }')
        return {k: list(v) for k, v in value.items()}


class McpSchema(Section):
    call_timeout = seconds()
    max_tools = count()
    tools = _ToolChoice()


class WebSearchSchema(Section):
    enabled = switch()
    max_uses = count()


def _url(**kwargs):
    return Typed((str,), "a string", validate=validate.Regexp(
        r"^https?://", error="must start with http:// or https://"), **kwargs)


class ProviderSchema(Section):
    type = text(PROVIDER_TYPES)
    base_url = _url(required=True, error_messages={
        "required": "is required: the server's URL, e.g. http://localhost:11434/v1"})
    api_key_env = text()
    api_key = text()
    models = _StringList()
    context_window = count()
    images = switch()
    reasoning = _Efforts()
    timeout = seconds()
    connect_timeout = seconds()
    max_retries = count(minimum=0)
    headers = _StringTable()
    api = text(("responses", "chat"))  # type openai (providers/openai.py)
    prompt_cache_key = switch()  # type openai
    prompt_cache = switch()  # type anthropic (providers/anthropic.py)
    cache_ttl = text(("5m", "1h"))  # type anthropic


class BuiltinProviderSchema(Section):
    """``[providers.openai]`` / ``[providers.anthropic]``: options of a built-in provider
    (its key and URL come from the environment)."""

    timeout = seconds()
    connect_timeout = seconds()
    max_retries = count(minimum=0)
    headers = _StringTable()
    api = text(("responses", "chat"))
    prompt_cache_key = switch()
    prompt_cache = switch()
    cache_ttl = text(("5m", "1h"))


ONLY_FOR = {"openai": ("prompt_cache", "cache_ttl"), "anthropic": ("api", "prompt_cache_key")}


def _tuning(**options):
    """The table of a cloud provider: the transport options and its own (providers/)."""
    return Section.from_dict({"timeout": seconds(), "connect_timeout": seconds(), "headers":
                              _StringTable(), "max_retries": count(minimum=0), **options})()


# built-in providers a [providers.<name>] table tunes (None: BuiltinProviderSchema)
TUNABLE = {"openai": None, "anthropic": None,
           "gemini": _tuning(context_cache=text(("implicit", "explicit"))),
           "bedrock": _tuning(region=text(), prompt_cache=switch(), base_url=_url()),
           "vertex": _tuning(project=text(), location=text(), prompt_cache=switch(),
                             cache_ttl=text(("5m", "1h")), base_url=_url(),
                             context_cache=text(("implicit", "explicit"))),
           "azure": _tuning(endpoint=_url(), api_version=text(), api=text(("responses", "chat")),
                            deployments=_StringTable())}


class _Providers(fields.Field):
    """``[providers.<name>]`` tables: a provider of its own, or the options of the
    built-in ``openai`` / ``anthropic`` (the other built-in names are refused)."""

    schema = ProviderSchema()
    builtin = BuiltinProviderSchema()

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, dict):
            raise ValidationError("must be tables: [providers.<name>]")
        loaded, errors = {}, {}
        for name, table in value.items():
            if name in BUILTIN_PROVIDERS and name not in TUNABLE:
                errors[name] = [f'"{name}" is a built-in provider (set it up with its '
                                "environment variables); give this one another name"]
            elif not isinstance(table, dict):
                errors[name] = ["must be a table: [providers.<name>]"]
            else:
                schema = TUNABLE.get(name) or (self.builtin if name in TUNABLE else self.schema)
                try:
                    loaded[name] = schema.load(table)
                except ValidationError as exc:
                    errors[name] = exc.messages
                    continue
                if TUNABLE.get(name) is not None:
                    continue
                kind = name if name in TUNABLE else loaded[name].get("type", "openai")
                wrong = [key for key in ONLY_FOR[kind] if key in loaded[name]]
                if wrong:
                    errors[name] = {key: [f"applies to type {'anthropic' if kind == 'openai' else 'openai'} "
                                          "providers only"] for key in wrong}
        if errors:
            raise ValidationError(errors)
        return loaded


class PriceSchema(Section):
    """``[prices."<model>"]``: USD per million tokens (providers/prices.py)."""

    input, output = usd(required=True), usd(required=True)
    cache_read, cache_write = usd(), usd()


class _Prices(_Providers):
    """``[prices."<model>"]`` tables, one a model id (a ``_Providers`` for problems())."""

    schema = PriceSchema()
    label = '[prices."<model>"]'

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, dict):
            raise ValidationError(f"must be tables: {self.label}")
        loaded, errors = {}, {}
        for name, table in value.items():
            if not isinstance(table, dict):
                errors[name] = [f"must be a table: {self.label}"]
                continue
            try:
                loaded[name] = self.schema.load(table)
            except ValidationError as exc:
                errors[name] = exc.messages
        if errors:
            raise ValidationError(errors)
        return loaded


class LspServerSchema(Section):
    """``[lsp.servers.<name>]``: a language server of the user's (lsp/servers.py)."""

    command = _StringList(required=True)
    extensions = _StringList(required=True)
    root_markers = _StringList()
    initialization_options = fields.Dict()


class _LspServers(_Prices):
    schema, label = LspServerSchema(), "[lsp.servers.<name>]"


class LspSchema(Section):
    enabled = switch()
    disabled = _StringList()
    warnings = switch()
    diagnostics_timeout = seconds()
    request_timeout = seconds()
    servers = _LspServers()


class HookSchema(Section):
    """One hook: ``{ type = "command", command = "...", timeout = 5 }`` (turns/hooks.py)."""

    type = text(("command",))
    command = Typed((str,), "a string", required=True,
                    validate=validate.Length(min=1, error="must not be empty"))
    timeout = seconds()


class HookGroupSchema(Section):
    """``[[hooks.<Event>]]``: which tools (``matcher``) and the hooks to run."""

    matcher = text()
    hooks = fields.List(fields.Nested(HookSchema), required=True)


class _Hooks(fields.Field):
    """``[[hooks.<Event>]]`` tables in Claude Code's shape, one list an event."""

    EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop")
    group = HookGroupSchema()

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, dict):
            raise ValidationError("must be tables: [[hooks.PreToolUse]]")
        loaded, errors = {}, {}
        for event, groups in value.items():
            if event not in self.EVENTS:
                errors[event] = [f"unknown hook event; use: {', '.join(self.EVENTS)}"]
            elif not isinstance(groups, list):
                errors[event] = [f"must be a list of tables: [[hooks.{event}]]"]
            else:
                try:
                    loaded[event] = self.group.load(groups, many=True)
                except ValidationError as exc:
                    errors[event] = exc.messages
        if errors:
            raise ValidationError(errors)
        return loaded


HOOKS = _Hooks()


class ConfigSchema(Section):
    provider = text()
    model = text()
    effort = text(EFFORTS)
    mode = text(MODE_IDS)
    max_turn_requests = count()
    max_parallel_tools = count()
    context_window = count()
    images = switch()
    approval_timeout = seconds(positive=False)  # 0: wait until the turn is cancelled
    wait_notice = seconds(positive=False)  # 0: never
    max_live_sessions = count()
    idle_session_timeout = seconds(positive=False)  # 0: never close an idle session
    store_busy_timeout = seconds()
    checkpoint_max_mb = mebibytes()
    model_titles = switch()
    shell = fields.Nested(ShellSchema)
    sandbox = fields.Nested(SandboxSchema)
    mcp = fields.Nested(McpSchema)
    web_search = fields.Nested(WebSearchSchema)
    lsp = fields.Nested(LspSchema)
    agents = fields.Nested(Section.from_dict({"max_parallel": count()}, name="AgentsSchema"))
    tools = fields.Nested(Section.from_dict({"edit_max_mb": mebibytes()}, name="ToolsSchema"))
    providers = _Providers()
    prices = _Prices()
    hooks = _Hooks()

    @post_load
    def _no_timeout(self, data, **kwargs):
        if data.get("approval_timeout") == 0:
            data["approval_timeout"] = None
        return data


SCHEMA = ConfigSchema()


# ------------------------------------------------------------------ reading
def read(path):
    """The checked contents of the config file at ``path``, or None when there is none."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None
    import tomllib  # only when there is a file to parse

    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None
    try:
        return SCHEMA.load(data)
    except ValidationError as exc:
        lines = [f"  {key}: {message}" for key, message in problems(exc.messages)]
        raise ConfigError(f"config file {path} has {_plural(len(lines))}:\n"
                          + "\n".join(lines)) from None


def problems(messages, schema=SCHEMA, prefix=""):
    """``(key, message)`` for each error of a load, unknown keys with the keys allowed."""
    for key, value in sorted(messages.items(), key=lambda item: str(item[0])):
        name = prefix[:-1] if key == "_schema" else f"{prefix}{key}"
        field = schema.fields.get(key) if schema is not None else None
        if isinstance(value, dict):
            if isinstance(field, fields.Nested):
                yield from problems(value, field.schema, name + ".")
            elif isinstance(field, _Providers):
                for provider, errors in sorted(value.items()):
                    table = (TUNABLE.get(provider) or field.builtin) \
                        if provider in TUNABLE and key == "providers" else field.schema
                    if isinstance(errors, dict):
                        yield from problems(errors, table, f"{name}.{provider}.")
                    else:
                        yield from ((f"{name}.{provider}", m) for m in errors)
            else:
                yield from problems(value, None, name + ".")
            continue
        for message in value:
            if message == UNKNOWN and schema is not None:
                table = f"[{prefix[:-1]}]" if prefix else "the top level"
                message = f"unknown key; {table} takes: {', '.join(schema.fields)}"
            yield name, message


def _plural(n):
    return "a mistake" if n == 1 else f"{n} mistakes"
