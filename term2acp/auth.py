"""Sign-in: which API keys the agent can use, the keys ``term2-acp --login`` stores, and
the ACP ``authMethods`` that point an editor at them.

Keys live in the environment (``OPENAI_API_KEY``...) or in ``auth.json`` next to the
config file (``$XDG_CONFIG_HOME/term2acp/auth.json``, mode 0600), written by
``term2-acp --login``. The environment wins over the file. No key is ever logged, sent
on the wire or put in the session store: only variable names travel.

Methods (``methods``): one ``agent`` method per configured provider that needs a key
(its description names the variable to set), and a ``terminal`` method that runs
``term2-acp --login``, offered only when the client advertises ``auth.terminal``.
``authenticate`` / ``auth/login`` re-read the stored keys and the config file's
providers, then check that a usable key now exists. When the only usable provider is
the local default, nothing needs a key.
"""

import contextlib
import fcntl
import json
import logging
import os
import sys

from term2acp.core import private

log = logging.getLogger(__name__)

TERMINAL_METHOD = "term2-login"
LOGIN_FLAG = "--login"
BUILTIN_KEYS = (("openai", "OpenAI (or an OpenAI-compatible server)", "OPENAI_API_KEY"),
                ("anthropic", "Anthropic", "ANTHROPIC_API_KEY"),
                ("gemini", "Google Gemini", "GEMINI_API_KEY"),
                ("azure", "Azure OpenAI", "AZURE_OPENAI_API_KEY"))
# the providers that sign in with their cloud's own credentials, not a key we store
CLOUD_CREDENTIALS = (
    ("bedrock", "Amazon Bedrock credentials",
     "Set AWS_PROFILE (after aws configure or aws sso login) or AWS_ACCESS_KEY_ID and "
     "AWS_SECRET_ACCESS_KEY, and AWS_REGION, in the agent's environment; then sign in again."),
    ("vertex", "Google Vertex AI credentials",
     "Set GOOGLE_APPLICATION_CREDENTIALS (or run gcloud auth application-default login), "
     "GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION in the agent's environment; then sign "
     "in again."))
OFFERED_WHEN_USED = ("gemini", "azure")


def _in_view(catalog, provider):
    return catalog.settings.provider == provider or catalog.configured(provider)


# another variable that holds a provider's key (Gemini's older name; an Azure Entra token)
ALSO = {"gemini": ("GOOGLE_API_KEY",), "azure": ("AZURE_OPENAI_AD_TOKEN",)}


def credentials_path(settings):
    return os.path.join(os.path.dirname(settings.config_path) or ".", "auth.json")


# ---------------------------------------------------------------- the stored keys
def load_keys(path):
    """``variable -> key`` from ``auth.json``; {} when absent or unreadable."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("ignoring the stored keys in %s: %s", path, type(exc).__name__)
        return {}
    keys = data.get("keys") if isinstance(data, dict) else None
    if not isinstance(keys, dict):
        return {}
    return {k: v for k, v in keys.items() if isinstance(k, str) and isinstance(v, str) and v}


def write_keys(path, keys):
    """Replace ``auth.json`` atomically; the file is 0600 from its first byte."""
    private.replace(path, json.dumps({"keys": keys}, indent=2) + "\n")


@contextlib.contextmanager
def keys_locked(path):
    """Hold ``auth.json``'s lock (a ``.lock`` file beside it, flock) while a writer reads,
    changes and replaces it: two ``--login`` runs at once then merge their keys instead
    of the second replacing the first's file with its older copy."""
    private.make_dirs(os.path.dirname(path) or ".")
    fd = os.open(f"{path}.lock", os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def apply_stored_keys(settings):
    """Put stored keys into ``settings.env`` where the real environment has none; forget
    ones applied earlier that are no longer stored (after a logout)."""
    settings.use_stored_keys(load_keys(credentials_path(settings)))


def forget_keys(settings):
    """Logout: remove every stored key (the file and this process's copy)."""
    path = credentials_path(settings)
    with keys_locked(path):
        if load_keys(path):
            write_keys(path, {})
    apply_stored_keys(settings)


# ---------------------------------------------------------------- which keys matter
def key_providers(catalog):
    """``(provider id, label, key variable)`` for each configured provider needing a key."""
    rows = [row for row in BUILTIN_KEYS]
    for name, cfg in catalog.custom.items():
        var = cfg.get("api_key_env")
        if isinstance(var, str) and var and not _loopback(cfg.get("base_url")):
            rows.append((name, f"{name} ({cfg.get('type', 'openai')}-compatible)", var))
    return rows


def _loopback(url):
    from term2acp.providers.openai import is_loopback

    return bool(url) and is_loopback(url)


def has_key(catalog, provider):
    """Whether ``provider`` can be used without signing in."""
    env = catalog.env
    if provider is None:
        return False
    if provider in ("local", "scripted"):
        return True
    if provider in catalog.custom:
        cfg = catalog.custom[provider]
        var = cfg.get("api_key_env")
        return bool((var and env.get(var)) or cfg.get("api_key") or _loopback(cfg.get("base_url")))
    if provider in (pid for pid, _label, _text in CLOUD_CREDENTIALS):
        return True  # the cloud's credential chain is asked at the request (it says what to set)
    for pid, _label, var in BUILTIN_KEYS:
        if pid == provider:
            base = env.get(f"{pid.upper()}_BASE_URL")
            return any(env.get(v) for v in (var, *ALSO.get(pid, ()))) or _loopback(base)
    return False


def usable(catalog, settings, provider=None):
    """True when a prompt could reach a model now (``provider``: the session's choice)."""
    from term2acp.providers.catalog import CatalogError

    if provider is None:
        try:
            provider, _model = catalog.resolve(settings.provider, settings.model)
        except CatalogError:
            return False
    return has_key(catalog, provider)


def reload(settings, catalog):
    """Re-read the stored keys and the config file's providers (for ``authenticate``)."""
    apply_stored_keys(settings)
    try:
        providers = _config_providers(settings.config_path)
    except Exception:  # noqa: BLE001 - a broken file keeps the providers loaded at start
        return
    if providers is not None:
        settings.use_providers(providers)
        catalog.custom.update(providers)


def _config_providers(path):
    from term2acp.config import read

    data = read(path)
    return None if data is None else data.get("providers", {})


# ---------------------------------------------------------------- ACP authMethods
def methods(catalog, terminal):
    """Runtime-neutral methods: ``(type, id, name, description)``. Gemini and the clouds'
    only where the user has them in view (chosen, or their variables set)."""
    rows = []
    for pid, label, var in key_providers(catalog):
        if pid in OFFERED_WHEN_USED and not _in_view(catalog, pid):
            continue
        rows.append(("agent", pid, f"{label} API key",
                     f"Set {var} in the agent's environment (the editor's agent settings), "
                     f"or store it with term2-acp --login; then sign in again."))
    rows += [("agent", pid, label, text) for pid, label, text in CLOUD_CREDENTIALS
             if _in_view(catalog, pid)]
    if terminal:
        rows.append(("terminal", TERMINAL_METHOD, "Enter an API key in a terminal",
                     "Runs term2-acp --login: a short prompt that stores the key in your "
                     "term2acp config (auth.json, readable only by you)."))
    return rows


def login_check(catalog, settings, method_id):
    """After re-reading: ``None`` when the method's key is usable now, else what to do."""
    reload(settings, catalog)
    names = {pid: var for pid, _label, var in key_providers(catalog)}
    if method_id in (pid for pid, _label, _text in CLOUD_CREDENTIALS):
        return None  # nothing of ours to check: the first request asks the cloud's chain
    if method_id in names:
        if has_key(catalog, method_id):
            return None
        return (f"No API key for {method_id} yet: set {names[method_id]} in the agent's "
                "environment or run term2-acp --login, then sign in again.")
    if method_id == TERMINAL_METHOD or method_id is None:
        if usable(catalog, settings):
            return None
        return "No usable API key yet: run term2-acp --login in a terminal, then sign in again."
    return f'unknown authentication method "{method_id}"'


# ---------------------------------------------------------------- term2-acp --login
def login_main(settings, catalog, stdin=None, stdout=None):
    """The terminal sign-in: pick a provider, paste its key; stored with mode 0600."""
    stdin = stdin or sys.stdin
    out = stdout or sys.stderr
    rows = key_providers(catalog)
    out.write("term2-acp sign-in: the key is stored in "
              f"{credentials_path(settings)} (readable only by you).\n")
    for number, (pid, label, var) in enumerate(rows, 1):
        out.write(f"  {number}. {label} ({var})\n")
    out.write(f"Provider [1-{len(rows)}, default 1]: ")
    out.flush()
    choice = stdin.readline()
    if not choice:
        out.write("\nno answer; nothing stored\n")
        return 1
    choice = choice.strip() or "1"
    if not choice.isdigit() or not 1 <= int(choice) <= len(rows):
        out.write(f"not a choice: {choice!r}; nothing stored\n")
        return 1
    pid, label, var = rows[int(choice) - 1]
    key = _read_secret(f"{var}: ", stdin, out)
    if not key:
        out.write("no key entered; nothing stored\n")
        return 1
    path = credentials_path(settings)
    with keys_locked(path):  # read, add, replace: one at a time (another run may be here)
        keys = load_keys(path)
        keys[var] = key
        write_keys(path, keys)
    out.write(f"Stored the {label} key. The editor can sign in now.\n")
    return 0


def _read_secret(prompt, stdin, out):
    """The key without echo when stdin is a terminal; a plain line otherwise."""
    if stdin is sys.stdin and stdin.isatty():
        import getpass

        return getpass.getpass(prompt).strip()
    out.write(prompt)
    out.flush()
    return stdin.readline().strip()
