"""Settings: built-in defaults < config file < environment < command-line flags.

The config file is TOML at ``$TERM2ACP_CONFIG`` or ``$XDG_CONFIG_HOME/term2acp/config.toml``;
``term2acp/config.py`` holds its schema (every key, its type and allowed values) and
README.rst's "Configuration reference" shows every key with its default. The attributes
below are those defaults: a key of the file replaces the attribute of the same name
(``[shell]``, ``[sandbox]``, ``[mcp]`` and ``[web_search]`` keys the attributes of those sections;
``[providers.*]`` and ``[prices.*]`` stay dicts, read by the catalog and the price table).
"""

import os

from term2acp.core.option_values import DEFAULT_MODE, EFFORTS

__all__ = ["EFFORTS", "Settings", "SettingsError", "config_path", "data_dir"]


class SettingsError(ValueError):
    pass


def data_dir(env=os.environ):
    explicit = env.get("TERM2ACP_HOME")
    if explicit:
        return explicit
    base = env.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "term2acp")


def config_path(env=os.environ):
    explicit = env.get("TERM2ACP_CONFIG")
    if explicit:
        return explicit
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "term2acp", "config.toml")


class ShellSettings:
    """``[shell]``: the shell tool's bounds."""

    __slots__ = ("timeout", "max_timeout", "network", "output_cap", "max_processes",
                 "process_output_kb")

    def __init__(self):
        self.timeout = 120.0
        self.max_timeout = 600.0
        self.network = False
        self.output_cap = 40_000  # characters of output returned to the model
        self.max_processes = 8  # background processes running at once, per session
        self.process_output_kb = 1024  # unread output kept per background process


class McpSettings:
    """``[mcp]``: limits on the MCP servers the editor sends (``term2acp/mcp/``)."""

    __slots__ = ("call_timeout", "max_tools", "tools")

    def __init__(self):
        self.call_timeout = 120.0  # seconds per tools/call; then a failed call, the turn goes on
        self.max_tools = 128  # tools one model request offers, built-ins included (mcp/offer.py)
        self.tools = {}  # server name -> the tool names or patterns it may offer


class WebSearchSettings:
    """``[web_search]``: the provider's own web search (``turns/websearch.py``)."""

    __slots__ = ("enabled", "max_uses", "__weakref__")  # turns/websearch.py's _told

    def __init__(self):
        self.enabled = False  # offered to models whose provider searches server-side
        self.max_uses = 5  # searches per model request, where the provider takes a bound


class AgentsSettings:
    """``[agents]``: sub-agents, the ``agent`` tool's child sessions (``turns/agents/``)."""

    __slots__ = ("max_parallel",)

    def __init__(self):
        self.max_parallel = 4  # children of one turn running at once


class ToolsSettings:
    """``[tools]``: bounds of the file tools."""

    __slots__ = ("edit_max_mb",)

    def __init__(self):
        self.edit_max_mb = 64.0  # largest file edit_file and apply_patch change (tools/edit.py)


class SandboxSettings:
    """``[sandbox]``: what the shell sandbox may read besides the workspace, and its bounds
    (see ``term2acp/sandbox/view.py`` and the README's "Shell sandbox" section)."""

    TOOLCHAINS = (".pyenv", ".cargo", ".rustup", ".nvm", ".local", ".gitconfig")

    __slots__ = ("toolchains", "read_paths", "memory_mb", "tmpfs_mb")

    def __init__(self):
        self.toolchains = list(self.TOOLCHAINS)  # relative to $HOME, read-only
        self.read_paths = []  # extra read-only paths (absolute or ~/...)
        self.memory_mb = 2048  # per command: cgroup v2 memory.max, else RLIMIT_DATA
        self.tmpfs_mb = 512  # each of /tmp, /dev/shm and $HOME inside the sandbox


class LspSettings:
    """``[lsp]``: language servers for diagnostics after writes and the code tool
    (``term2acp/lsp/``)."""

    __slots__ = ("enabled", "disabled", "warnings", "diagnostics_timeout", "request_timeout",
                 "servers")

    def __init__(self):
        self.enabled = True  # false: no language server at all
        self.disabled = []  # built-in servers turned off, by name
        self.warnings = False  # also report new warnings after a write
        self.diagnostics_timeout = 5.0  # seconds a write waits for its diagnostics
        self.request_timeout = 15.0  # seconds a code tool call waits (start-up included)
        self.servers = {}  # name -> {command, extensions, root_markers, initialization_options}


class Settings:
    """Plain attributes (no dataclass: this is on the start-up path), every one declared
    (``__slots__``, as each section's) and made here: a misspelt name fails, read or set.
    Built whole by :meth:`load` (and ``cli.load``, which resolves the provider and model);
    after that only its own methods change it (a sign-in's keys and providers)."""

    __slots__ = ("provider", "model", "effort", "mode", "data_dir", "config_path",
                 "max_line_bytes", "max_turn_requests", "max_parallel_tools", "context_window",
                 "images", "approval_timeout", "wait_notice", "shutdown_timeout",
                 "max_live_sessions", "idle_session_timeout", "store_busy_timeout",
                 "checkpoint_max_mb", "model_titles", "script", "shell", "sandbox", "mcp",
                 "web_search", "lsp", "agents", "tools", "providers", "prices", "hooks", "env",
                 "stored_keys", "report_runs", "max_cost")

    def __init__(self, data_dir="", config_path="", env=None):
        self.provider = None
        self.model = None
        self.effort = "default"
        self.mode = DEFAULT_MODE  # default session mode: read-only | plan | ask | auto
        self.data_dir = data_dir
        self.config_path = config_path
        self.max_line_bytes = 64 * 1024 * 1024
        self.max_turn_requests = 50
        self.max_parallel_tools = 4  # calls of one model round running at once (turns/rounds.py)
        self.context_window = None  # tokens; None: the catalog's or learned (turns/context.py)
        self.images = None  # True/False: the model accepts images; None: the catalog says
        self.approval_timeout = None
        self.wait_notice = 15.0  # seconds of silence from the model before saying so (0: never)
        self.shutdown_timeout = 10.0
        self.max_live_sessions = 256  # sessions live at once in one process
        self.idle_session_timeout = 600.0  # seconds unused before a session is idle-closed
        self.store_busy_timeout = 5.0  # seconds a store write waits for another process
        self.checkpoint_max_mb = 256.0  # file contents kept per session for /undo
        self.model_titles = True  # one small model request titles a session after turn 1
        self.script = None  # scripted provider script file
        self.shell = ShellSettings()
        self.sandbox = SandboxSettings()
        self.mcp = McpSettings()
        self.web_search = WebSearchSettings()
        self.lsp = LspSettings()
        self.agents = AgentsSettings()
        self.tools = ToolsSettings()
        self.providers = {}  # name -> dict from the config file
        self.prices = {}  # model id -> {input, output, cache_read, cache_write} (USD / Mtok)
        self.hooks = {}  # event -> [{matcher, hooks: [{type, command, timeout}]}] (turns/hooks.py)
        self.env = dict(env or {})
        self.stored_keys = set()  # env variables filled from term2-acp --login's keys (auth.py)
        # ``term2acp exec`` (headless/exec.py): the idle update says the turn's requests and
        # cost; the USD a run may spend (None: no bound).
        self.report_runs = False
        self.max_cost = None

    @classmethod
    def load(cls, flags=None, env=None):
        env = dict(os.environ if env is None else env)
        settings = cls(data_dir=data_dir(env), config_path=config_path(env), env=env)
        settings._apply_file(settings.config_path)
        settings._apply_env(env)
        from term2acp.auth import apply_stored_keys  # keys saved by term2-acp --login

        apply_stored_keys(settings)
        for key, value in (flags or {}).items():
            if value is not None:
                setattr(settings, key, value)
        if settings.effort not in EFFORTS:
            raise SettingsError(f"effort must be one of: {', '.join(EFFORTS)}")
        return settings

    def use_stored_keys(self, stored):
        """The keys ``term2-acp --login`` stored (``auth.py``: name -> key) go into ``env``
        where the environment has none; those used before and no longer stored go (a
        logout)."""
        for var in self.stored_keys:
            self.env.pop(var, None)
        self.stored_keys = {var for var in stored if not self.env.get(var)}
        for var in self.stored_keys:
            self.env[var] = stored[var]

    def use_providers(self, providers):
        """The config file's ``[providers.*]``, read again at a sign-in (``auth.reload``)."""
        self.providers = providers

    def reading_also(self, paths):
        """A copy whose sandbox also reads ``paths`` (a language server's own files)."""
        import copy  # off the start-up path

        out = copy.copy(self)
        out.sandbox = copy.copy(self.sandbox)
        out.sandbox.read_paths = [*self.sandbox.read_paths, *paths]
        return out

    def _apply_file(self, path):
        if not os.path.exists(path):  # the schema is built only for a file to check
            return
        from term2acp.config import ConfigError, read

        try:
            data = read(path)
        except ConfigError as exc:
            raise SettingsError(str(exc)) from None
        for key, value in (data or {}).items():
            if key in ("providers", "prices", "hooks") or not isinstance(value, dict):
                setattr(self, key, value)
            else:  # a [section]: its keys replace the section object's defaults
                section = getattr(self, key)
                for name, item in value.items():
                    setattr(section, name, item)

    def _apply_env(self, env):
        if env.get("TERM2ACP_PROVIDER"):
            self.provider = env["TERM2ACP_PROVIDER"]
        if env.get("TERM2ACP_MODEL"):
            self.model = env["TERM2ACP_MODEL"]
        if env.get("TERM2ACP_SCRIPT"):
            self.script = env["TERM2ACP_SCRIPT"]
        for name, attr in (("TERM2ACP_MAX_LINE_BYTES", "max_line_bytes"),
                           ("TERM2ACP_MAX_TURN_REQUESTS", "max_turn_requests"),
                           ("TERM2ACP_MAX_LIVE_SESSIONS", "max_live_sessions")):
            raw = env.get(name)
            if raw:
                try:
                    value = int(raw)
                except ValueError:
                    raise SettingsError(f"{name} must be a positive integer") from None
                if value <= 0:
                    raise SettingsError(f"{name} must be a positive integer")
                setattr(self, attr, value)
        raw = (env.get("TERM2ACP_LSP") or "").lower()  # on/off over [lsp] enabled
        if raw:
            if raw not in ("on", "off"):
                raise SettingsError("TERM2ACP_LSP must be on or off")
            self.lsp.enabled = raw == "on"
        raw = env.get("TERM2ACP_APPROVAL_TIMEOUT")
        if raw:
            try:
                self.approval_timeout = float(raw) if float(raw) > 0 else None
            except ValueError:
                raise SettingsError("TERM2ACP_APPROVAL_TIMEOUT must be a number of seconds") from None
