"""Bubblewrap: probe availability once, build the sandbox command line, run in it.

The sandbox must hold even when the agent runs as root, where plain ``--ro-bind`` can be
undone by a remount. So every command gets a new user namespace with all capabilities
dropped and nested user namespaces disabled, new pid/ipc/uts namespaces, a new terminal
session (a ``tty`` command keeps its own pseudo-terminal), and dies with the agent. Its
network is the session's private loopback (``loopback.py``), its own empty one without a
session, or the host's when ``network`` is granted (``run``/``start``).

What the command sees of the filesystem is ``view.py``'s business (the workspace, the
system directories and the home toolchains; credentials, root-only files and host sockets
masked); what it may use is ``cgroup.py``'s (tasks, memory); the tmpfs mounts are bounded
by ``[sandbox] tmpfs_mb``.
"""

import logging
import os
import re
import shutil
import threading
from dataclasses import dataclass, replace

from term2acp.core import executables, reaper, scratch
from term2acp.sandbox import cgroup, process, view

log = logging.getLogger(__name__)

BWRAP_ENV = "TERM2ACP_BWRAP"  # override the bwrap executable (tests: a bogus path)
PIDS_MAX = 1024  # tasks per command, where a pids cgroup is available
PROBE_TIMEOUT = 10.0
TTY_TERM = "xterm-256color"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

ENV_ALLOWED = frozenset({"PATH", "HOME", "LANG", "TERM", "TZ", "USER", "SHELL"})
SECRET_SHAPED = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)

MIB = 1024 * 1024
PROBE_TMPFS = 1 * MIB

# The sandboxed command's keeper (lifeline below). bubblewrap arms each parent-death
# signal of its chain without checking that the parent is still there, so a kill -9 of
# the agent at the wrong moment can leave a link unarmed and the command running. The
# keeper does not rely on them: end of file on the agent's lifeline means the agent is
# gone. Found at the start, nothing runs; found later, by a watcher beside the command,
# everything in the sandbox's PID namespace is killed (its init then ends, and bwrap with
# it). The command runs in the foreground (its stdin and terminal are its own) as the
# keeper's only other child, without the lifeline; its exit status is the sandbox's. A
# SIGTERM for the command's processes (shell_kill's grace) waits in the keeper for the
# command's end (a trap, not an ignored signal: the command gets the default) and is
# ignored by the watcher, which is ended with SIGKILL. What the keeper itself would say
# (bash's "Terminated" for a command a signal ended) goes nowhere; the command's
# standard error is its own.
CHECK_SHELL = "/bin/bash"
_CHECK = ('read -t 0 -u {fd} && exit 125; '
          '{{ trap "" TERM INT HUP; read -u {fd}; '
          'if [ "$PPID" = 1 ]; then kill -KILL -1; else kill -KILL 0; fi; }} & '
          'trap : TERM; exec {fd}<&- {{e}}>&2 2>/dev/null; "$@" 2>&$e {{e}}>&-; s=$?; '
          'kill -KILL $!; exit $s')
_lifeline = []  # (read end, write end) of this process's lifeline pipe, once made


def lifeline():
    """The read end of a pipe whose only writer is this agent (the write end is
    close-on-exec and never written): a sandboxed command that inherits it sees end of
    file once the agent is gone, nothing readable while it lives. The read end is
    inheritable (``sh`` passes ``pass_fds`` as they are)."""
    if not _lifeline or _lifeline[0][2] != os.getpid():  # a forked agent makes its own
        read, write = os.pipe()
        os.set_inheritable(read, True)
        _lifeline[:] = [(read, write, os.getpid())]
    return _lifeline[0][0]


_HARDENING = ("--unshare-user", "--cap-drop", "ALL", "--unshare-pid", "--unshare-ipc",
              "--unshare-uts", "--new-session", "--die-with-parent")


@dataclass(frozen=True)
class Availability:
    """Result of the start-up probe. ``warning()`` is the text the caller prints."""

    available: bool
    reason: str = ""
    bwrap: str = ""
    disable_userns: bool = True
    tmpfs_size: bool = True  # bwrap >= 0.8 bounds tmpfs mounts (--size)
    transient: bool = False  # the probe ran out of time (a loaded machine): asked again

    def warning(self):
        return unavailable_message(self.reason)


def unavailable_message(reason):
    return f"shell sandbox unavailable: {reason}; shell tool calls will be refused"


def bwrap_path():
    """The bwrap executable: ``$TERM2ACP_BWRAP``, else ``bwrap`` on the absolute entries of
    the PATH the agent started with, pinned (``core/executables.py``)."""
    return os.environ.get(BWRAP_ENV) or executables.find("bwrap") or "/usr/bin/bwrap"


_probes = {}
_probe_lock = threading.Lock()


def probe(refresh=False, on_launch=None):
    """Run ``bwrap … true`` once per bwrap path and cache the :class:`Availability` (a
    probe that ran out of time is not kept: a machine busy for a while must not lose the
    shell for the agent's life; the next call probes again). ``on_launch()`` is called
    once a probe's bwrap has started (the launch, which holds the hub, is over)."""
    path = bwrap_path()
    with _probe_lock:
        if refresh or path not in _probes or _probes[path].transient:
            _probes[path] = _probe(path, on_launch)
            if not _probes[path].available:
                log.warning("%s", _probes[path].warning())
        return _probes[path]


def _probe(path, on_launch=None):
    """The first feature set this bwrap accepts: newer flags are dropped one at a time."""
    if not os.path.isabs(path):
        return Availability(False, f"the bubblewrap path {path} is not absolute", path)
    try:
        executables.check(path)
    except executables.Unsafe as exc:
        return Availability(False, str(exc), path)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        return Availability(False, f"bubblewrap not found at {path}", path)
    folder = scratch.make("probe-")
    candidate = Availability(True, "", path)
    try:
        for _ in range(3):
            ok, reason = _try(candidate, folder, on_launch)
            if ok:
                cgroup.RunGroup.supported()  # finds the run groups; sweeps dead agents' ones
                if not candidate.tmpfs_size:
                    log.warning("%s cannot bound tmpfs sizes (bubblewrap < 0.8): /tmp and "
                                "/dev/shm in the sandbox are limited by memory only", path)
                return candidate
            if "disable-userns" in reason and candidate.disable_userns:
                candidate = replace(candidate, disable_userns=False)
            elif "--size" in reason and candidate.tmpfs_size:
                candidate = replace(candidate, tmpfs_size=False)
            else:
                break
        return Availability(False, reason, path, transient=reason.startswith(_TIMED_OUT))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


_TIMED_OUT = "timed out: "


def _try(candidate, scratch, on_launch=None):
    out = bytearray()
    size = ["--size", str(PROBE_TMPFS)] if candidate.tmpfs_size else []
    argv = [*_namespaces(candidate, keep_network=False), *view.system_flags(),
            "--proc", "/proc", "--dev", "/dev", *size, "--tmpfs", "/tmp",
            "--bind", scratch, scratch, "--remount-ro", "/", "--chdir", scratch, "--", "true"]
    try:
        result = process.run(argv, cwd=scratch, env={"PATH": DEFAULT_PATH},
                             on_output=out.extend, timeout=PROBE_TIMEOUT,
                             on_launch=None if on_launch is None else lambda _: on_launch())
    except process.LaunchError as exc:
        return False, f"cannot run {candidate.bwrap}: {exc.strerror}"
    except process.ProcessTimeout:
        return False, f"{_TIMED_OUT}{candidate.bwrap} did not finish within {PROBE_TIMEOUT:g}s"
    if result.exit_code == 0:
        return True, ""
    text = out.decode("utf-8", "replace").strip().splitlines()
    detail = text[-1] if text else f"exit status {result.exit_code or result.signal}"
    return False, f"{os.path.basename(candidate.bwrap)} cannot create namespaces ({detail})"


def run(argv, root, settings, on_output=None, timeout=None, pass_fds=(), network=None,
        loopback=None, tty=False, roots=()):
    """Run ``argv`` inside the sandbox with ``root`` as cwd; see ``process.run``.

    ``network``: True runs it on the host's network (writes still confined to the root,
    secrets still masked: only the network namespace differs), False in the session's
    ``loopback`` (a ``loopback.Loopback``: the servers its other commands started are
    reachable on 127.0.0.1) or, without one, in a network namespace of its own; None
    means ``[shell] network``. ``tty``: on a pseudo-terminal (its controlling terminal).
    ``roots``: the session's other workspace roots, mounted as the root is.

    Raises ``SandboxUnavailable`` (nothing is run) when the probe failed, ``view.Refused``
    (nothing is run) for a root the sandbox will not run in (``/``), and
    ``loopback.LoopbackError`` when the session's network namespace cannot be made.
    """
    full, enter, options = _prepare(argv, root, settings, network, loopback, tty, roots)
    return process.run(full, on_output=on_output, timeout=timeout,
                       pass_fds=(*pass_fds, *options.pop("lifeline")), enter=enter, **options)


def start(argv, root, settings, on_output=None, on_exit=None, network=None, loopback=None,
          tty=False, roots=(), stderr=None):
    """Start ``argv`` in the sandbox and return its ``process.Process`` at once (for a
    command that keeps running): its stdin is a pipe, or the terminal with ``tty``;
    ``stderr`` as for ``process.start``. The rest is as for :func:`run`."""
    full, enter, options = _prepare(argv, root, settings, network, loopback, tty, roots)
    if not tty:
        options["stdin"] = process.PIPE
    return process.start(full, on_output=on_output, on_exit=on_exit, enter=enter,
                         stderr=stderr, pass_fds=options.pop("lifeline"), **options)


def _prepare(argv, root, settings, network, loopback, tty, roots=()):
    availability = probe()
    if not availability.available:
        raise SandboxUnavailable(availability.reason)
    if network is None:
        network = bool(settings.shell.network)
    for each in (root, *roots):  # roots the sandbox runs in (``/`` is refused by the view)
        executables.note_root(each)
    try:
        executables.check(availability.bwrap, [root, *roots])
    except executables.Unsafe as exc:
        raise SandboxUnavailable(str(exc)) from None
    enter = None
    if loopback is not None and not network:
        enter = loopback.enter_hook(availability)
    fds = ()
    if os.path.exists(CHECK_SHELL):  # the agent still there, or the command runs nothing
        fds = (lifeline(),)
        argv = [CHECK_SHELL, "-c", _CHECK.format(fd=fds[0]), "term2-sandbox", *argv]
    full = _for_settings(argv, root, settings, availability, network, enter is not None, tty,
                         roots)
    data_dir = settings.data_dir
    options = {"lifeline": fds, "cwd": root, "env": scrub_env(settings.env, tty), "limits": limits_of(settings),
               "stdin": process.TTY if tty else process.NULL,
               "on_launch": lambda pid: reaper.record(data_dir, pid)}
    return full, enter, options


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot run here; the message is the reason."""


def alive():
    """True while any sandboxed process of this agent is running (``process.live``): then
    a path inside a root can change at any moment, so the tools do their own fd-checked I/O
    instead of handing the editor a path (``tools/editor_io.py``)."""
    return process.live() > 0


def build_argv(argv, root, settings, network=None, tty=False):
    """The full bwrap command line for ``argv`` in ``root`` (probing if not done yet), in a
    network namespace of its own unless ``network`` (None: ``[shell] network``)."""
    if network is None:
        network = bool(settings.shell.network)
    return _for_settings(argv, root, settings, probe(), network, False, tty)


def limits_of(settings):
    """The tasks and memory one command may use (``[sandbox] memory_mb``)."""
    memory_mb = settings.sandbox.memory_mb
    return cgroup.Limits(PIDS_MAX, memory_mb * MIB if memory_mb else None)


def tmpfs_bytes(settings):
    """The size of each sandbox tmpfs (``[sandbox] tmpfs_mb``)."""
    return settings.sandbox.tmpfs_mb * MIB


def _for_settings(argv, root, settings, availability, network, joined=False, tty=False,
                  roots=()):
    """Namespaces, then the filesystem view in mount order, then the command. ``joined``:
    the child joins the session's network namespace (``loopback.py``) instead of making
    one; ``network``: it keeps the host's."""
    size = tmpfs_bytes(settings) if availability.tmpfs_size else None
    return [*_namespaces(availability, network or joined, tty),
            *view.flags(root, settings, size, network, roots), "--chdir", root, "--", *argv]


def _namespaces(availability, keep_network, tty=False):
    # A tty command keeps its session: its terminal is the agent's own pseudo-terminal,
    # made its controlling terminal before bwrap runs (process.py), so what it types into
    # it (TIOCSTI) reaches only itself; every other command gets a new session.
    out = [availability.bwrap, *(f for f in _HARDENING if not (tty and f == "--new-session"))]
    if availability.disable_userns:
        out.append("--disable-userns")
    if not keep_network:
        out.append("--unshare-net")
    return out


def scrub_env(env, tty=False):
    """The sandbox environment: an allowlist, minus anything secret-shaped (a terminal
    gets a ``TERM`` if the agent has none)."""
    out = {}
    for key, value in (env or {}).items():
        allowed = key in ENV_ALLOWED or key.startswith("LC_")
        if allowed and not SECRET_SHAPED.search(key) and "\x00" not in value:
            out[key] = value
    out.setdefault("PATH", DEFAULT_PATH)
    out.setdefault("HOME", view.passwd_home() or "/")
    out["TMPDIR"] = "/tmp"
    if tty:
        out.setdefault("TERM", TTY_TERM)
    return out
