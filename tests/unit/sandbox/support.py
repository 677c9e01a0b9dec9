"""Helpers for sandbox and tool tests: real directories, settings, contexts, bounded waits."""

import os
import shutil
import tempfile
import time
import uuid

import gevent
import pytest

from term2acp.sandbox import bwrap
from term2acp.core.access import AccessState
from term2acp.settings import Settings
from term2acp.tools.base import ToolContext

# /tmp is a private tmpfs inside the sandbox, so attack targets live elsewhere on the host
# (otherwise a "successful" write would only land in the sandbox's own tmpfs).
HOST_TMP = "/var/tmp"


def needs_sandbox():
    """Skip marker for tests that need a working bubblewrap."""
    status = bwrap.probe()
    return pytest.mark.skipif(not status.available, reason=f"no sandbox: {status.reason}")


class HostTree:
    """A scratch tree on the host, outside /tmp: base/{ws, sibling, home, data, config}."""

    def __init__(self):
        self.base = os.path.realpath(tempfile.mkdtemp(prefix="t2acp-test-", dir=HOST_TMP))
        for name in ("ws", "sibling", "home", "data", "config/term2acp"):
            os.makedirs(os.path.join(self.base, name))
        self.root = self.path("ws")
        self.home = self.path("home")

    def path(self, *parts):
        return os.path.join(self.base, *parts)

    def settings(self, sandbox=None, **shell):
        env = {"HOME": self.home, "PATH": os.environ.get("PATH", bwrap.DEFAULT_PATH),
               "LANG": "C.UTF-8", "TERM2ACP_HOME": self.path("data"),
               "TERM2ACP_CONFIG": self.path("config", "term2acp", "config.toml"),
               "OPENAI_API_KEY": "sk-secret-test", "GITHUB_TOKEN": "ghp-secret-test"}
        settings = Settings.load(env=env)
        for key, value in shell.items():
            setattr(settings.shell, key, value)
        for key, value in (sandbox or {}).items():
            setattr(settings.sandbox, key, value)
        return settings

    def context(self, settings=None, events=None, run_tool=None, root=None, shell=None):
        settings = settings or self.settings()
        events = [] if events is None else events
        return ToolContext(root=root or self.root, session_id="s", call_id="c1",
                           access=AccessState(root or self.root), settings=settings,
                           emit=events.append, run_tool=run_tool, shell=shell)

    def write(self, rel, text="", mode=None):
        """Create ``base/rel`` (parents included) with ``text``; its path."""
        path = self.path(rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            fh.write(text)
        if mode is not None:
            os.chmod(path, mode)
        return path

    def cleanup(self):
        shutil.rmtree(self.base, ignore_errors=True)


def marker():
    return f"t2acp-attack-{uuid.uuid4().hex[:12]}"


def wait_until(predicate, timeout=5.0, interval=0.01):
    """Poll ``predicate`` cooperatively until it is true or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        gevent.sleep(interval)


def _live_processes():
    """``(pid, command line)`` of every host process that is not a zombie."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read()
            with open(f"/proc/{entry}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != b"Z":
            yield int(entry), cmdline


def host_pids_with(token):
    """Host pids running ``sleep <token>`` (zombies excluded), wherever they came from."""
    return [pid for pid, cmdline in _live_processes()
            if cmdline.split(b"\0")[:2] == [b"sleep", token.encode()]]


def naming(token):
    """Host pids (zombies excluded) whose command line contains ``token``."""
    return [pid for pid, cmdline in _live_processes() if token.encode() in cmdline]
