"""Bubblewrap: probe availability once, build the sandbox command line, run in it.

The sandbox must hold even when the agent runs as root, where plain ``--ro-bind`` can be
undone by a remount. So every command gets a new user namespace with all capabilities
dropped and nested user namespaces disabled, new pid/ipc/uts (and, unless networking is
allowed, net) namespaces, a new terminal session, and dies with the agent.

Filesystem view: the host root read-only; the canonical session root the only writable
bind; a private tmpfs ``/tmp``; a fresh ``/proc``; a minimal ``/dev``; ``/run`` replaced
by an empty tmpfs (it holds root-owned unix sockets, which a read-only mount does not
protect: the sandbox uid maps to the agent's uid); credential stores and the agent's own
config and data directories covered by empty read-only mounts.
"""

import logging
import os
import pwd
import re
import shutil
import tempfile
import threading
from dataclasses import dataclass

from term2acp.sandbox import process

log = logging.getLogger(__name__)

BWRAP_ENV = "TERM2ACP_BWRAP"  # override the bwrap executable (tests: a bogus path)
PIDS_MAX = 1024  # tasks per command, where a pids cgroup is available
PROBE_TIMEOUT = 10.0
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

ENV_ALLOWED = frozenset({"PATH", "HOME", "LANG", "TERM", "TZ", "USER", "SHELL"})
SECRET_SHAPED = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)

CREDENTIALS = (".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".netrc", ".docker",
               ".kube", ".git-credentials", ".npmrc", ".pypirc", ".config/gh", ".config/hub",
               ".gem/credentials", ".bash_history", ".zsh_history", ".python_history")

# A workspace root at one of these (or inside the trees) stays read-only.
_PROTECTED_EXACT = ("/", "/root", "/var", "/mnt", "/media", "/srv", "/opt")
_PRIVATE = ("/tmp", "/run")  # replaced by empty tmpfs: nothing there needs covering
_PROTECTED_TREES = ("/etc", "/boot", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/proc",
                    "/sys", "/dev")

_HARDENING = ("--unshare-user", "--cap-drop", "ALL", "--unshare-pid", "--unshare-ipc",
              "--unshare-uts", "--new-session", "--die-with-parent")


@dataclass(frozen=True)
class Availability:
    """Result of the start-up probe. ``warning()`` is the text the caller prints."""

    available: bool
    reason: str = ""
    bwrap: str = ""
    disable_userns: bool = True

    def warning(self):
        return unavailable_message(self.reason)


def unavailable_message(reason):
    return f"shell sandbox unavailable: {reason}; shell tool calls will be refused"


def bwrap_path():
    """The bwrap executable: ``$TERM2ACP_BWRAP``, else ``bwrap`` on PATH."""
    return os.environ.get(BWRAP_ENV) or shutil.which("bwrap") or "/usr/bin/bwrap"


_probes = {}
_probe_lock = threading.Lock()


def probe(refresh=False):
    """Run ``bwrap … true`` once per bwrap path and cache the :class:`Availability`."""
    path = bwrap_path()
    with _probe_lock:
        if refresh or path not in _probes:
            _probes[path] = _probe(path)
            if not _probes[path].available:
                log.warning("%s", _probes[path].warning())
        return _probes[path]


def _probe(path):
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        return Availability(False, f"bubblewrap not found at {path}", path)
    scratch = tempfile.mkdtemp(prefix="term2acp-probe-")
    try:
        for disable_userns in (True, False):
            candidate = Availability(True, "", path, disable_userns)
            ok, reason = _try(candidate, scratch)
            if ok:
                return candidate
            if "disable-userns" not in reason:
                break
        return Availability(False, reason, path)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _try(candidate, scratch):
    out = bytearray()
    argv = _command(["true"], scratch, candidate, network=False, covers=[], writable=True)
    try:
        result = process.run(argv, cwd=scratch, env={"PATH": DEFAULT_PATH},
                             on_output=out.extend, timeout=PROBE_TIMEOUT)
    except process.LaunchError as exc:
        return False, f"cannot run {candidate.bwrap}: {exc.strerror}"
    except process.ProcessTimeout:
        return False, f"{candidate.bwrap} did not finish within {PROBE_TIMEOUT:g}s"
    if result.exit_code == 0:
        return True, ""
    text = out.decode("utf-8", "replace").strip().splitlines()
    detail = text[-1] if text else f"exit status {result.exit_code or result.signal}"
    return False, f"{os.path.basename(candidate.bwrap)} cannot create namespaces ({detail})"


def run(argv, root, settings, on_output=None, timeout=None, pass_fds=()):
    """Run ``argv`` inside the sandbox with ``root`` as cwd; see ``process.run``.

    Raises ``SandboxUnavailable`` (nothing is run) when the probe failed.
    """
    availability = probe()
    if not availability.available:
        raise SandboxUnavailable(availability.reason)
    return process.run(_for_settings(argv, root, settings, availability), cwd=root,
                       env=scrub_env(settings.env), on_output=on_output, timeout=timeout,
                       pass_fds=pass_fds, pids_max=PIDS_MAX)


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot run here; the message is the reason."""


def build_argv(argv, root, settings):
    """The full bwrap command line for ``argv`` in ``root`` (probing if not done yet)."""
    return _for_settings(argv, root, settings, probe())


def _for_settings(argv, root, settings, availability):
    return _command(argv, root, availability, network=bool(settings.shell.network),
                    covers=hidden_paths(settings), writable=writable_root(root, settings))


def _command(argv, root, availability, network, covers, writable):
    """Namespaces, then the filesystem view in mount order, then the command."""
    out = [availability.bwrap, *_HARDENING]
    if availability.disable_userns:
        out.append("--disable-userns")
    if not network:
        out.append("--unshare-net")
    out += ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
            "--tmpfs", "/run"]
    if network:  # keep DNS working when resolv.conf points into /run
        resolv = os.path.dirname(os.path.realpath("/etc/resolv.conf"))
        if _strictly_inside("/run", resolv):
            out += ["--ro-bind-try", resolv, resolv]
    covers = [p for p in covers
              if _strictly_inside(root, p) or not any(_strictly_inside(d, p) for d in _PRIVATE)]
    # Covers inside the root go on top of its bind; the others (ancestors of the root
    # included) go first, so the root is bound back over them.
    out += _cover([p for p in covers if not _strictly_inside(root, p)])
    out += ["--bind" if writable else "--ro-bind", root, root]
    out += _cover([p for p in covers if _strictly_inside(root, p)])
    for path in ["/run", *(p for p in covers if os.path.isdir(p))]:
        out += ["--remount-ro", path]
    out += ["--chdir", root, "--", *argv]
    return out


def _cover(paths):
    """Mount an empty tmpfs on directories and /dev/null on files."""
    out = []
    for path in paths:
        out += ["--tmpfs", path] if os.path.isdir(path) else ["--ro-bind", "/dev/null", path]
    return out


def hidden_paths(settings):
    """Canonical, existing credential paths and the agent's own config and data dirs."""
    homes = {h for h in (settings.env.get("HOME"), _passwd_home()) if h}
    candidates = [os.path.join(home, rel) for home in homes for rel in CREDENTIALS]
    if settings.env.get("XDG_CONFIG_HOME"):
        candidates.append(os.path.join(settings.env["XDG_CONFIG_HOME"], "gcloud"))
    candidates += _own_paths(settings)
    seen = []
    for path in candidates:
        if not os.path.lexists(path):
            continue
        real = os.path.realpath(path)
        if os.path.exists(real) and real != "/" and real not in seen:
            seen.append(real)
    return seen


def _own_paths(settings):
    """The data dir, and the config dir (or only the file, if the dir is not ours alone)."""
    out = [settings.data_dir] if settings.data_dir else []
    if settings.config_path:
        folder = os.path.dirname(settings.config_path)
        own = "term2acp" in os.path.basename(folder)
        out.append(folder if own else settings.config_path)
    return out


def writable_root(root, settings):
    """False for roots that must stay read-only even as a workspace (``/``, ``$HOME``…)."""
    homes = {h.rstrip("/") for h in (settings.env.get("HOME"), _passwd_home()) if h}
    if root in _PROTECTED_EXACT or root in homes:
        return False
    if root == "/usr/local" or root.startswith("/usr/local/"):
        return True
    return not any(root == t or root.startswith(t + "/") for t in _PROTECTED_TREES)


def scrub_env(env):
    """The sandbox environment: an allowlist, minus anything secret-shaped."""
    out = {}
    for key, value in (env or {}).items():
        allowed = key in ENV_ALLOWED or key.startswith("LC_")
        if allowed and not SECRET_SHAPED.search(key) and "\x00" not in value:
            out[key] = value
    out.setdefault("PATH", DEFAULT_PATH)
    out.setdefault("HOME", _passwd_home() or "/")
    out["TMPDIR"] = "/tmp"
    return out


def _strictly_inside(root, path):
    return path.startswith(root.rstrip("/") + "/")


def _passwd_home():
    try:
        return pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        return None
