"""Settings: built-in defaults < config file < environment < command-line flags.

The config file is TOML at ``$TERM2ACP_CONFIG`` or ``$XDG_CONFIG_HOME/term2acp/config.toml``::

    provider = "openai"            # default provider
    model = "gpt-4.1-mini"         # default model
    effort = "default"
    mode = "auto"                  # read-only | ask | auto (the editor's mode picker)
    max_turn_requests = 50         # model round trips per prompt
    max_parallel_tools = 4         # calls of one model round run side by side when none
                                   # asks (1: one after another)
    context_window = 32000         # tokens, overrides the model catalog; past
                                   # 80 % the conversation is compacted (agent/context.py)
    images = true                  # the model accepts images (default: the catalog's word)
    approval_timeout = 0           # seconds; 0 = wait until the turn is cancelled
    max_live_sessions = 256        # sessions live at once in one process
    idle_session_timeout = 600     # seconds unused before a session is closed (0: never);
                                   # it reopens transparently on its next use
    store_busy_timeout = 5         # seconds a session-store write waits for another
                                   # process's lock before it fails

    [shell]
    timeout = 120                  # default per-command timeout, seconds
    max_timeout = 600
    network = false                # allow network inside the sandbox
    max_processes = 8              # background processes running at once, per session
    process_output_kb = 1024       # unread output kept per background process

    [mcp]                          # the editor's MCP servers (README: MCP servers)
    call_timeout = 120             # seconds one MCP tool call may take before it fails

    [sandbox]                      # what the shell sandbox sees (README: Shell sandbox)
    toolchains = [".pyenv", ".cargo", ".rustup", ".nvm", ".local", ".gitconfig"]
    read_paths = ["/opt/conda", "~/datasets"]   # extra read-only paths
    memory_mb = 2048               # per command (cgroup v2 memory.max, else RLIMIT_DATA)
    tmpfs_mb = 512                 # each of /tmp, /dev/shm and $HOME in the sandbox

    [providers.local-llama]        # extra providers: type openai | anthropic
    type = "openai"
    base_url = "http://127.0.0.1:8080/v1"
    api_key_env = "LLAMA_KEY"      # optional; loopback endpoints need no key
    models = ["qwen2.5-coder:7b"]
"""

import os

EFFORTS = ("default", "none", "minimal", "low", "medium", "high", "xhigh")


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
    def __init__(self):
        self.timeout = 120.0
        self.max_timeout = 600.0
        self.network = False
        self.output_cap = 40_000  # characters of output returned to the model
        self.max_processes = 8  # background processes running at once, per session
        self.process_output_kb = 1024  # unread output kept per background process


class McpSettings:
    """``[mcp]``: limits on the MCP servers the editor sends (``term2acp/mcp/``)."""

    def __init__(self):
        self.call_timeout = 120.0  # seconds per tools/call; then a failed call, the turn goes on

    def apply(self, data):
        value = data.get("call_timeout")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            self.call_timeout = float(value)


class SandboxSettings:
    """``[sandbox]``: what the shell sandbox may read besides the workspace, and its bounds
    (see ``term2acp/sandbox/view.py`` and the README's "Shell sandbox" section)."""

    TOOLCHAINS = (".pyenv", ".cargo", ".rustup", ".nvm", ".local", ".gitconfig")

    def __init__(self):
        self.toolchains = list(self.TOOLCHAINS)  # relative to $HOME, read-only
        self.read_paths = []  # extra read-only paths (absolute or ~/...)
        self.memory_mb = 2048  # per command: cgroup v2 memory.max, else RLIMIT_DATA
        self.tmpfs_mb = 512  # each of /tmp, /dev/shm and $HOME inside the sandbox

    def apply(self, data):
        for key in ("toolchains", "read_paths"):
            value = data.get(key)
            if isinstance(value, list) and all(isinstance(v, str) and v for v in value):
                setattr(self, key, list(value))
        for key in ("memory_mb", "tmpfs_mb"):
            value = data.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                setattr(self, key, value)


class Settings:
    """Plain attributes (no dataclass: this is on the start-up path)."""

    def __init__(self, data_dir="", config_path="", env=None):
        self.provider = None
        self.model = None
        self.effort = "default"
        self.mode = "auto"  # default session mode: read-only | ask | auto
        self.data_dir = data_dir
        self.config_path = config_path
        self.max_line_bytes = 64 * 1024 * 1024
        self.max_turn_requests = 50
        self.max_parallel_tools = 4  # calls of one model round running at once (agent/rounds.py)
        self.context_window = None  # tokens; None: the catalog's or learned (agent/context.py)
        self.images = None  # True/False: the model accepts images; None: the catalog says
        self.approval_timeout = None
        self.shutdown_timeout = 10.0
        self.max_live_sessions = 256  # sessions live at once in one process
        self.idle_session_timeout = 600.0  # seconds unused before a session is idle-closed
        self.store_busy_timeout = 5.0  # seconds a store write waits for another process
        self.script = None  # scripted provider script file
        self.shell = ShellSettings()
        self.sandbox = SandboxSettings()
        self.mcp = McpSettings()
        self.providers = {}  # name -> dict from the config file
        self.env = dict(env or {})

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

    def _apply_file(self, path):
        try:
            with open(path, "rb") as fh:
                raw = fh.read()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise SettingsError(f"cannot read config file {path}: {exc}") from None
        import tomllib  # only when there is a file to parse

        try:
            data = tomllib.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise SettingsError(f"cannot read config file {path}: {exc}") from None
        for key in ("provider", "model", "effort"):
            if isinstance(data.get(key), str):
                setattr(self, key, data[key])
        if data.get("mode") in ("read-only", "ask", "auto"):
            self.mode = data["mode"]
        if isinstance(data.get("max_turn_requests"), int) and data["max_turn_requests"] > 0:
            self.max_turn_requests = data["max_turn_requests"]
        parallel = data.get("max_parallel_tools")
        if isinstance(parallel, int) and not isinstance(parallel, bool) and parallel > 0:
            self.max_parallel_tools = parallel
        window = data.get("context_window")
        if isinstance(window, int) and not isinstance(window, bool) and window > 0:
            self.context_window = window
        if isinstance(data.get("images"), bool):
            self.images = data["images"]
        if isinstance(data.get("max_live_sessions"), int) and data["max_live_sessions"] > 0:
            self.max_live_sessions = data["max_live_sessions"]
        idle = data.get("idle_session_timeout")
        if isinstance(idle, (int, float)) and idle >= 0:
            self.idle_session_timeout = float(idle)  # 0: never idle-close
        busy = data.get("store_busy_timeout")
        if isinstance(busy, (int, float)) and not isinstance(busy, bool) and busy > 0:
            self.store_busy_timeout = float(busy)
        timeout = data.get("approval_timeout")
        if isinstance(timeout, (int, float)) and timeout > 0:
            self.approval_timeout = float(timeout)
        shell = data.get("shell") or {}
        if isinstance(shell, dict):
            for key in ("timeout", "max_timeout"):
                if isinstance(shell.get(key), (int, float)) and shell[key] > 0:
                    setattr(self.shell, key, float(shell[key]))
            if isinstance(shell.get("network"), bool):
                self.shell.network = shell["network"]
            for key in ("max_processes", "process_output_kb"):
                value = shell.get(key)
                if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                    setattr(self.shell, key, value)
        if isinstance(data.get("sandbox"), dict):
            self.sandbox.apply(data["sandbox"])
        if isinstance(data.get("mcp"), dict):
            self.mcp.apply(data["mcp"])
        providers = data.get("providers") or {}
        if isinstance(providers, dict):
            self.providers = {k: v for k, v in providers.items() if isinstance(v, dict)}

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
        raw = env.get("TERM2ACP_APPROVAL_TIMEOUT")
        if raw:
            try:
                self.approval_timeout = float(raw) if float(raw) > 0 else None
            except ValueError:
                raise SettingsError("TERM2ACP_APPROVAL_TIMEOUT must be a number of seconds") from None
