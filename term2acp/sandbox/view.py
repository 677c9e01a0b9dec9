"""What a sandboxed command sees: the filesystem view of one workspace, as bubblewrap flags.

The policy (the README's "Shell sandbox" section says the same for users):

* read-write: the workspace root (read-only when it is, or contains, a home directory, or
  lies in a system tree; ``/``, ``/tmp``, ``/var/tmp`` and roots in ``/proc``, ``/sys``,
  ``/dev`` or ``/run`` are refused);
* read-only: the system directories (``SYSTEM_DIRS``), the toolchains kept in the home
  directory (``[sandbox] toolchains``, relative to ``$HOME``), the extra read paths
  (``[sandbox] read_paths``) and the agent's own Python installation (``run_code`` runs it);
* private: ``/tmp``, ``/dev/shm`` and ``$HOME`` are fresh tmpfs bounded by ``[sandbox]
  tmpfs_mb``, ``/run`` is an empty read-only directory, ``/proc`` and ``/dev`` are the
  sandbox's own; nothing else of the host exists (the rest of the home, other projects,
  ``/var``, ``/srv``, ``/mnt``, ``/root``, ``/sys``, host sockets in ``/run`` and ``/tmp``);
* masked wherever it is visible (an empty read-only tmpfs on a directory, ``/dev/null`` on
  anything else): root-only entries of ``/etc`` (no world-read bit, e.g. ``/etc/shadow``,
  ``/etc/gshadow``, ``/etc/sudoers``; the sandbox user maps to the agent's uid, which may
  be 0), the credential and start-up files of ``core.sensitive`` (also when the root is
  ``$HOME``), the agent's own config and data directories, and host unix sockets and
  FIFOs: all of those in ``/etc``, and those in the top ``SCAN_DEPTH`` levels of the
  toolchains and read paths (``scan.py``), and in a workspace root that is, or holds, a
  home directory. Inside any other workspace, sockets and FIFOs stay usable.

Cost: the bind list is computed once per workspace and settings and reused for
``PLAN_TTL`` seconds, the scans (``/etc``, sockets in the read-only trees) once per tree
for ``scan.TTL`` seconds whatever the workspace; the credential masks (a few dozen
``lstat`` calls) are recomputed for every command, so a credential file created during a
session is masked from the next command on.
"""

import logging
import os
import pwd
import sys
import threading
import time

from term2acp.core import sensitive
from term2acp.sandbox import scan

log = logging.getLogger(__name__)

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
REFUSED_TREES = ("/proc", "/sys", "/dev", "/run", "/var/run")
SHARED_SCRATCH = ("/tmp", "/var/tmp")  # every program's sockets live there (ssh-agent...)
PLAN_TTL = 60.0
_PLANS_MAX = 64
# A workspace root at one of these (or inside the trees) stays read-only.
_PROTECTED_EXACT = ("/root", "/var", "/mnt", "/media", "/srv", "/opt", "/home")
_PROTECTED_TREES = ("/etc", "/boot", "/usr", "/bin", "/sbin", "/lib", "/lib64")


class Refused(ValueError):
    """This workspace root cannot be sandboxed; the message says why and what to do."""


def check_root(root):
    """Raise :class:`Refused` for roots the sandbox will not run in."""
    if os.path.normpath(root or "/") == "/":
        raise Refused("the workspace root is / (the whole filesystem), so the shell cannot "
                      "give it a safe view; open a project directory as the session's "
                      "working directory instead")
    for tree in REFUSED_TREES:
        if _within(tree, root):
            raise Refused(f"the workspace root {root} is inside {tree}, which the sandbox "
                          "replaces with its own; open a project directory instead")
    if os.path.normpath(root) in SHARED_SCRATCH:
        raise Refused(f"the workspace root is {root}, which every program on this machine "
                      "shares (their sockets, such as ssh-agent's, live there); open a "
                      "project directory instead (a directory inside it is fine)")


def flags(root, settings, tmpfs_bytes, network=False, roots=()):
    """The filesystem part of the bwrap command line for a command in ``root`` (and the
    session's other ``roots``, each mounted as a root is)."""
    check_root(root)
    for extra in roots:
        check_root(extra)
    mounted = sorted({root, *roots}, key=len)  # a root inside another is mounted after it
    plan = _plan(root, settings)
    size = ["--size", str(int(tmpfs_bytes))] if tmpfs_bytes else []
    # /run is an empty directory of the sandbox's root tmpfs, read-only like the rest of it
    out = ["--proc", "/proc", "--dev", "/dev", *size, "--tmpfs", "/dev/shm",
           *size, "--tmpfs", "/tmp", "--dir", "/run"]
    if network:  # keep DNS working when resolv.conf points into /run
        resolv = os.path.dirname(os.path.realpath("/etc/resolv.conf"))
        if _strictly_inside("/run", resolv):
            out += ["--ro-bind-try", resolv, resolv]
    for target, dest in plan.symlinks:
        out += ["--symlink", target, dest]
    if plan.home:
        out += [*size, "--tmpfs", plan.home]
    for src, dest in plan.binds:
        out += ["--ro-bind", src, dest]
    # A masked entry that is gone since the scan (a lock file removed, a package upgrade)
    # needs no mask, and bwrap could not mount over it: every command would fail until
    # the scan is redone. One lstat per mask, per command.
    extra_masks = [m for r in roots if r != root for m in _plan(r, settings).masks]
    present = [path for path in dict.fromkeys(plan.masks + extra_masks + dynamic_masks(settings))
               if os.path.lexists(path)]
    masks = _visible(present, plan.binds + [(r, r) for r in mounted])
    inside = [m for m in masks if any(_strictly_inside(r, m[0]) for r in mounted)]
    out += _cover([m for m in masks if m not in inside])
    for each in mounted:
        out += ["--bind" if writable_root(each, settings) else "--ro-bind", each, each]
    out += _cover(inside)
    for path in ["/dev", *(dest for dest, is_dir in masks if is_dir), "/"]:
        out += ["--remount-ro", path]
    return out


def system_flags():
    """The system directories, read-only (links such as ``/bin -> usr/bin`` as links)."""
    out = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            out += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            out += ["--ro-bind", path, path]
    return out


class Plan:
    """The cached part of a view: ``symlinks`` and ``binds`` (``(src, dest)`` pairs),
    ``home`` (the tmpfs home, or None) and ``masks`` (host paths found by the scans)."""

    def __init__(self, symlinks, home, binds, masks):
        self.symlinks, self.home, self.binds, self.masks = symlinks, home, binds, masks
        self.made = time.monotonic()


_plans = {}
_plans_lock = threading.Lock()


def _plan(root, settings):
    logical = os.path.normpath(settings.env.get("HOME") or passwd_home() or "/")
    own = tuple(os.path.realpath(p) for p in own_paths(settings))
    key = (root, home_of(settings), logical, tuple(toolchains_of(settings)),
           tuple(read_paths_of(settings)), own)
    with _plans_lock:
        plan = _plans.get(key)
        if plan is None or time.monotonic() - plan.made > PLAN_TTL:
            if len(_plans) >= _PLANS_MAX:
                _plans.clear()
            plan = _plans[key] = _make_plan(root, *key[1:])
        return plan


def clear_cache():
    with _plans_lock:
        _plans.clear()
    scan.clear_cache()


def _make_plan(root, home, logical_home, toolchains, read_paths, own):
    symlinks = [(os.readlink(d), d) for d in SYSTEM_DIRS if os.path.islink(d)]
    binds = [(d, d) for d in SYSTEM_DIRS if os.path.isdir(d) and not os.path.islink(d)]
    home_tmpfs = None
    if home and home != "/" and not _within(root, home) and not _in_system(home):
        home_tmpfs = home
        if logical_home != home and not _in_system(logical_home):
            symlinks.append((home, logical_home))  # $HOME names a link to the real home
        for rel in toolchains:
            _add_bind(binds, os.path.join(home, rel), home, own, why="toolchain")
    for path in read_paths:
        _add_bind(binds, path, home, own, why="read path")
    masks = scan.cached("etc", "/etc")
    for src, _ in binds:
        if not _in_system(src):
            masks += scan.cached("sockets", src)
    if (home and _within(root, home)) or root in _PROTECTED_EXACT:
        # a home (or what holds one) is no project: its sockets are the host's (e.g.
        # ~/.docker/run/docker.sock), so they are masked like those of the read paths
        masks += scan.cached("sockets", root)
    for prefix in sorted({os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)}):
        _add_bind(binds, prefix, home, own, why="the agent's Python")  # install tree: no scan
    return Plan(symlinks, home_tmpfs, binds, masks)


def _add_bind(binds, dest, home, own, why):
    """Bind ``dest`` (its real path) read-only unless it is missing, covered, sensitive or
    inside the agent's own config and data dirs (``own``)."""
    if not os.path.lexists(dest):
        return
    src = os.path.realpath(dest)
    if not os.path.exists(src) or src == "/":
        return
    if sensitive.is_sensitive(src, home) or sensitive.is_sensitive(dest, home):
        log.warning("sandbox: %s %s is a credential or start-up file; not shown", why, dest)
        return
    if any(_within(path, src) for path in own):
        log.warning("sandbox: %s %s holds the agent's own data; not shown", why, dest)
        return
    for have_src, have_dest in binds:
        if _within(have_src, src) and dest == have_dest + src[len(have_src):]:
            return  # already visible where it belongs
    binds.append((src, dest))


def dynamic_masks(settings):
    """Credential and start-up files of every home, and the agent's own dirs (now)."""
    paths = []
    for home in homes_of(settings):
        paths += sensitive.home_credentials(home)
    paths += own_paths(settings)
    out = []
    for path in paths:
        real = os.path.realpath(path)
        if os.path.exists(real) and real != "/":
            out.append(real)
    return out


def own_paths(settings):
    """The data dir, and the config dir (or only the file, if the dir is not ours alone)."""
    out = [settings.data_dir] if settings.data_dir else []
    if settings.config_path:
        folder = os.path.dirname(settings.config_path)
        own = "term2acp" in os.path.basename(folder)
        out.append(folder if own else settings.config_path)
    return [p for p in out if os.path.lexists(p)]


def _visible(host_paths, mounts):
    """``(dest, is_dir)`` for every place a masked host path shows up in the sandbox."""
    out, seen = [], set()
    for path in host_paths:
        is_dir = os.path.isdir(path)
        for src, dest in mounts:
            if not _strictly_inside(src, path):
                continue  # a mask never hides a whole mount (nor the root itself)
            where = dest + path[len(src):]
            if where not in seen:
                seen.add(where)
                out.append((where, is_dir))
    return out


def _cover(masks):
    out = []
    for dest, is_dir in masks:
        out += ["--tmpfs", dest] if is_dir else ["--ro-bind", "/dev/null", dest]
    return out


def writable_root(root, settings):
    """False for roots that stay read-only even as a workspace (a home, or what holds one,
    and the system trees)."""
    if any(_within(root, home) for home in homes_of(settings)):
        return False
    if root in _PROTECTED_EXACT:
        return False
    if _within("/usr/local", root):
        return True
    return not any(_within(tree, root) for tree in _PROTECTED_TREES)


def home_of(settings):
    """The sandbox's home: the agent's ``$HOME``, canonical (None when unset)."""
    home = settings.env.get("HOME") or passwd_home()
    return os.path.realpath(home) if home else None


def homes_of(settings):
    """Every home whose credentials are masked: ``$HOME`` and the passwd home."""
    out = []
    for home in (home_of(settings), passwd_home()):
        if home and os.path.realpath(home) not in out and os.path.realpath(home) != "/":
            out.append(os.path.realpath(home))
    return out


def toolchains_of(settings):
    return list(settings.sandbox.toolchains)


def read_paths_of(settings):
    """Extra read-only paths, absolute, ``~`` meaning the agent's ``$HOME``."""
    home = settings.env.get("HOME") or passwd_home() or ""
    out = []
    for raw in settings.sandbox.read_paths:
        path = home + raw[1:] if raw == "~" or raw.startswith("~/") else raw
        if os.path.isabs(path):
            out.append(os.path.normpath(path))
        else:
            log.warning("sandbox: read path %r is not absolute; ignored", raw)
    return out


def passwd_home():
    """The agent user's home from the password database (None if it has no entry)."""
    try:
        return pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        return None


def _in_system(path):
    return any(_within(os.path.realpath(d), path) for d in SYSTEM_DIRS if os.path.exists(d))


def _within(base, path):
    return path == base or path.startswith(base.rstrip("/") + "/")


def _strictly_inside(root, path):
    return path.startswith(root.rstrip("/") + "/")
