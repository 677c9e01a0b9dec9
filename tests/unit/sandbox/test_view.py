"""sandbox/view.py: the [sandbox] settings, the cached plan, links in the home directory."""

import os

import pytest

from term2acp import sandbox
from term2acp.sandbox import view
from term2acp.settings import Settings, SettingsError
from tests.unit.sandbox.support import HostTree, needs_sandbox


@pytest.fixture
def tree():
    tree = HostTree()
    yield tree
    tree.cleanup()


def run(tree, script, settings):
    out = bytearray()
    result = sandbox.run(["/bin/sh", "-c", script], tree.root, settings, on_output=out.extend,
                         timeout=30)
    return result, out.decode("utf-8", "replace")


def test_sandbox_section_of_the_config_file(tree):
    config = tree.write("config/term2acp/config.toml",
                        '[sandbox]\ntoolchains = [".sdkman"]\nread_paths = ["/opt/x", "~/d"]\n'
                        "memory_mb = 1024\ntmpfs_mb = 128\n")
    settings = Settings.load(env={"HOME": tree.home, "TERM2ACP_CONFIG": config})
    assert settings.sandbox.toolchains == [".sdkman"]
    assert settings.sandbox.read_paths == ["/opt/x", "~/d"]
    assert (settings.sandbox.memory_mb, settings.sandbox.tmpfs_mb) == (1024, 128)
    assert view.read_paths_of(settings) == ["/opt/x", os.path.join(tree.home, "d")]


def test_invalid_sandbox_values_are_refused_naming_each_key(tree):
    config = tree.write("config/term2acp/config.toml",
                        '[sandbox]\ntoolchains = ".x"\nread_paths = [1]\nmemory_mb = -1\n'
                        'tmpfs_mb = "big"\n')
    with pytest.raises(SettingsError) as caught:
        Settings.load(env={"HOME": tree.home, "TERM2ACP_CONFIG": config})
    message = str(caught.value)
    assert config in message
    for key in ("toolchains", "read_paths", "memory_mb", "tmpfs_mb"):
        assert f"sandbox.{key}: must be" in message


def test_relative_read_paths_are_ignored(tree):
    settings = tree.settings(sandbox={"read_paths": ["relative/dir", "~user/x"]})
    assert view.read_paths_of(settings) == []


def test_the_plan_is_computed_once_per_workspace(tree):
    settings = tree.settings()
    first = view._plan(tree.root, settings)
    assert view._plan(tree.root, settings) is first
    other = view._plan(tree.path("sibling"), settings)
    assert other is not first


@needs_sandbox()
def test_a_linked_toolchain_shows_at_its_home_path_and_own_data_stays_masked(tree):
    tree.write("elsewhere/local/bin/tool", "#!/bin/sh\necho linked tool\n", 0o755)
    tree.write("elsewhere/local/share/term2acp/sessions.db", "DATA-DIR-SECRET")
    os.symlink(tree.path("elsewhere", "local"), os.path.join(tree.home, ".local"))
    settings = tree.settings()
    settings.data_dir = os.path.join(tree.home, ".local", "share", "term2acp")
    result, out = run(tree, "~/.local/bin/tool; cat ~/.local/share/term2acp/sessions.db; "
                            "ls -A ~/.local/share/term2acp", settings)
    assert "linked tool" in out
    assert "DATA-DIR-SECRET" not in out and "sessions.db\n" not in out
    _, listing = run(tree, f"ls -A {tree.path('elsewhere')} && echo VISIBLE", settings)
    assert "VISIBLE" not in listing  # shown at ~/.local only, not where the link points


@needs_sandbox()
def test_home_given_through_a_link_is_the_sandbox_home(tree):
    tree.write("home/.pyenv/version", "3.11\n")
    os.symlink(tree.home, tree.path("homelink"))
    settings = tree.settings()
    settings.env["HOME"] = tree.path("homelink")
    result, out = run(tree, 'cd "$HOME" && cat .pyenv/version && echo x > scratch && '
                            "cat scratch", settings)
    assert result.exit_code == 0 and out == "3.11\nx\n"
    assert not os.path.exists(tree.path("home", "scratch"))  # the sandbox home is private


def test_a_large_tree_scan_yields_to_the_hub_and_stops_at_its_budget(tree, monkeypatch):
    import gevent

    from term2acp.sandbox import scan

    for i in range(60):
        os.makedirs(tree.path("big", f"d{i}", "sub"))
        for j in range(50):
            open(tree.path("big", f"d{i}", "sub", f"f{j}"), "w").close()
    os.mkfifo(tree.path("big", "d0", "pipe"))
    monkeypatch.setattr(scan, "YIELD_EVERY", 100)
    ticks = []

    def tick():
        while True:
            ticks.append(1)
            gevent.sleep(0)

    ticker = gevent.spawn(tick)
    gevent.sleep(0)
    try:
        found = scan.special_files(tree.path("big"))
    finally:
        ticker.kill()
    assert found == [tree.path("big", "d0", "pipe")]
    assert len(ticks) > 10  # other greenlets ran during the walk
    monkeypatch.setattr(scan, "SCAN_BUDGET", 500)
    assert len(list(scan._walk(tree.path("big"), depth=None, files=True))) <= 500
