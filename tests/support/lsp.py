"""What the language server tests share: the agent's PATH with the real servers `.ci/run`
installs (pylsp with pyflakes in this Python, typescript-language-server in tests/lsp), the
config that gives them time on a loaded machine, and the server processes of a workspace
as /proc shows them."""

import importlib.util
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NODE_BIN = os.path.join(REPO, "tests", "lsp", "node_modules", ".bin")
HUNG = os.path.join(REPO, "tests", "support", "lsp_hung.py")


def missing(typescript=True):
    """The real servers not installed here (``.ci/run`` installs both)."""
    out = []
    if not os.path.exists(os.path.join(os.path.dirname(sys.executable), "pylsp")) or \
            importlib.util.find_spec("pyflakes") is None:
        out.append("pylsp with pyflakes (the test extra)")
    if typescript and not os.path.exists(os.path.join(NODE_BIN, "typescript-language-server")):
        out.append("typescript-language-server (npm --prefix tests/lsp install)")
    return out


def needs_servers(typescript=True):
    """Skip without the real servers, except under CI=true, where the test then fails."""
    ci = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
    absent = missing(typescript)
    return pytest.mark.skipif(bool(absent) and not ci, reason=f"not installed: {', '.join(absent)}")


def lsp_env(tmp_path, extra="", diagnostics=40, requests=60, top=""):
    """The agent's environment additions: PATH with the servers first, and a config file
    (``TERM2ACP_CONFIG`` of the test kit) with bounds generous enough for a loaded
    machine, plus ``extra`` TOML (tables) and ``top`` (top-level keys)."""
    path = os.pathsep.join([NODE_BIN, os.path.dirname(sys.executable), os.environ["PATH"]])
    (tmp_path / "config.toml").write_text(
        f"{top}[lsp]\ndiagnostics_timeout = {diagnostics}\nrequest_timeout = {requests}\n" + extra)
    return {"PATH": path, "TERM2ACP_LSP": "on"}  # the test kit turns them off


def keeper(cmdline):
    """True for the sandbox keeper's shell (and its watcher): ``/bin/bash -c <keeper>
    term2-sandbox <the command>``."""
    words = cmdline.split(" ")
    return words[0] == "/bin/bash" and words[1:2] == ["-c"] and " term2-sandbox " in cmdline


def server_processes(workspace, name=None):
    """Pids of the processes running in ``workspace`` (their cwd), whose command line
    contains ``name`` when given: the language servers and their sandboxes."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry}/cwd") != workspace:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if keeper(cmdline):  # the sandbox's keeper (sandbox/bwrap.py) names its command
            continue
        if (name is None or name in cmdline) and "bwrap" not in cmdline.split(" ")[0]:
            out.append(int(entry))
    return sorted(out)


def interfaces(pid):
    """The network interfaces process ``pid`` sees."""
    with open(f"/proc/{pid}/net/dev") as fh:
        return {line.split(":")[0].strip() for line in fh.readlines()[2:]}
