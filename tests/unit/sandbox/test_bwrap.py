"""sandbox/bwrap.py: probe, command line, environment scrubbing, what is hidden."""

import os

import pytest

from term2acp import sandbox
from term2acp.sandbox import bwrap, view
from tests.unit.sandbox.support import HostTree, needs_sandbox


@pytest.fixture
def tree():
    tree = HostTree()
    yield tree
    tree.cleanup()


@needs_sandbox()
def test_probe_is_cached_and_available():
    first = bwrap.probe()
    assert first.available and first.reason == ""
    assert bwrap.probe() is first


def test_bogus_bwrap_is_unavailable_with_a_reason(monkeypatch):
    monkeypatch.setenv(bwrap.BWRAP_ENV, "/nonexistent/bwrap")
    status = bwrap.probe()
    assert not status.available
    assert "/nonexistent/bwrap" in status.reason
    assert status.warning() == (f"shell sandbox unavailable: {status.reason}; "
                                "shell tool calls will be refused")


def test_bwrap_that_fails_is_unavailable(monkeypatch):
    monkeypatch.setenv(bwrap.BWRAP_ENV, "/bin/false")
    status = bwrap.probe(refresh=True)
    assert not status.available and "cannot create namespaces" in status.reason


def test_run_refuses_when_unavailable(monkeypatch, tree):
    monkeypatch.setenv(bwrap.BWRAP_ENV, "/nonexistent/bwrap")
    with pytest.raises(sandbox.SandboxUnavailable):
        sandbox.run(["/bin/sh", "-c", "touch ran"], tree.root, tree.settings())
    assert not os.path.exists(os.path.join(tree.root, "ran"))


@needs_sandbox()
def test_command_line_is_hardened(tree):
    argv = bwrap.build_argv(["true"], tree.root, tree.settings())
    for flag in ("--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                 "--unshare-net", "--new-session", "--die-with-parent", "--disable-userns"):
        assert flag in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert ["/", "/"] not in [argv[i + 1:i + 3] for i, a in enumerate(argv) if a == "--ro-bind"]
    assert [argv[i + 1:i + 3] for i, a in enumerate(argv) if a == "--bind"] == [
        [tree.root, tree.root]]
    assert {"/tmp", "/dev/shm", tree.home} <= {
        argv[i + 1] for i, a in enumerate(argv) if a == "--tmpfs"}
    assert argv[argv.index("--chdir") + 1] == tree.root
    assert argv[-2:] == ["--", "true"]


@needs_sandbox()
def test_network_setting_keeps_the_network(tree):
    argv = bwrap.build_argv(["true"], tree.root, tree.settings(network=True))
    assert "--unshare-net" not in argv


def test_environment_is_scrubbed():
    env = {"PATH": "/bin", "HOME": "/h", "LANG": "C", "LC_ALL": "C", "TERM": "xterm",
           "TZ": "UTC", "USER": "u", "SHELL": "/bin/sh", "OPENAI_API_KEY": "x",
           "GITHUB_TOKEN": "x", "AWS_SECRET_ACCESS_KEY": "x", "DB_PASSWORD": "x",
           "LC_API_KEY": "x", "EDITOR": "vi", "SSH_AUTH_SOCK": "/run/agent"}
    assert bwrap.scrub_env(env) == {"PATH": "/bin", "HOME": "/h", "LANG": "C", "LC_ALL": "C",
                                    "TERM": "xterm", "TZ": "UTC", "USER": "u",
                                    "SHELL": "/bin/sh", "TMPDIR": "/tmp"}


def test_environment_defaults():
    env = bwrap.scrub_env({})
    assert env["PATH"] == bwrap.DEFAULT_PATH and env["TMPDIR"] == "/tmp" and env["HOME"]


def test_credentials_and_own_dirs_are_masked_where_visible(tree):
    for rel in (".ssh", ".aws", ".gnupg", ".kube", ".config/gcloud"):
        os.makedirs(os.path.join(tree.home, rel))
    for rel in (".netrc", ".git-credentials", ".bashrc"):
        open(os.path.join(tree.home, rel), "w").close()
    masks = view.dynamic_masks(tree.settings())
    for rel in (".ssh", ".aws", ".gnupg", ".kube", ".config/gcloud", ".netrc",
                ".git-credentials", ".bashrc"):
        assert os.path.join(tree.home, rel) in masks
    assert tree.path("data") in masks
    assert tree.path("config", "term2acp") in masks


def test_config_file_outside_an_own_dir_masks_only_the_file(tree):
    settings = tree.settings()
    settings.config_path = tree.path("sibling", "agent.toml")
    open(settings.config_path, "w").close()
    masks = view.dynamic_masks(settings)
    assert settings.config_path in masks and tree.path("sibling") not in masks


def test_protected_roots_stay_read_only(tree):
    settings = tree.settings()
    assert not view.writable_root(tree.home, settings)
    assert not view.writable_root(tree.base, settings)  # holds the home
    assert not view.writable_root("/etc/foo", settings)
    assert not view.writable_root("/usr", settings)
    assert view.writable_root("/usr/local/src", settings)
    assert view.writable_root(tree.root, settings)


@needs_sandbox()
def test_a_bwrap_without_size_still_sandboxes_with_unbounded_tmpfs(tree, monkeypatch):
    real = bwrap.probe().bwrap
    fake = tree.write("bin/old-bwrap", "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = --size ] && "
                      "{ echo 'bwrap: Unknown option --size' >&2; exit 1; }; done\n"
                      f"exec {real} \"$@\"\n", 0o755)
    monkeypatch.setenv(bwrap.BWRAP_ENV, fake)
    status = bwrap.probe(refresh=True)
    assert status.available and not status.tmpfs_size
    argv = bwrap.build_argv(["true"], tree.root, tree.settings())
    assert argv[0] == fake and "--size" not in argv
    out = bytearray()
    result = sandbox.run(["/bin/sh", "-c", "echo ok > /tmp/x && cat /tmp/x"], tree.root,
                         tree.settings(), on_output=out.extend, timeout=30)
    assert result.exit_code == 0 and out == b"ok\n"


@needs_sandbox()
def test_a_probe_that_runs_out_of_time_is_asked_again(monkeypatch):
    """A machine busy for a while must not lose the shell for the agent's life."""
    real = bwrap._try
    monkeypatch.setattr(bwrap, "_try", lambda candidate, folder, on_launch=None: (
        False, f"{bwrap._TIMED_OUT}{candidate.bwrap} did not finish within 10s"))
    slow = bwrap.probe(refresh=True)
    assert not slow.available and slow.transient and "did not finish" in slow.reason
    monkeypatch.setattr(bwrap, "_try", real)
    assert bwrap.probe().available  # not kept: probed again


def test_a_failed_probe_is_kept(monkeypatch):
    monkeypatch.setenv(bwrap.BWRAP_ENV, "/bin/false")
    first = bwrap.probe(refresh=True)
    assert not first.available and not first.transient
    assert bwrap.probe() is first
