"""Which language server serves a file and what of its installation the sandbox shows
(term2acp/lsp/servers.py), and how a write's new problems are told apart and bounded
(term2acp/lsp/diagnostics.py), on real files in temporary folders."""

import os

import pytest

from term2acp.lsp import diagnostics, servers
from term2acp.settings import Settings


def settings(path, **lsp):
    out = Settings(env={"PATH": path})
    for key, value in lsp.items():
        setattr(out.lsp, key, value)
    return out


def program(path, text="#!/bin/sh\n"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text)
    os.chmod(path, 0o755)
    return path


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "work"
    root.mkdir()
    return os.path.realpath(tmp_path)


def test_lsp_the_first_python_server_on_path_serves_and_a_venv_prefix_is_shown(tree):
    venv = os.path.join(tree, "tools", "venv")
    python = program(os.path.join(venv, "bin", "python3"))
    program(os.path.join(venv, "bin", "pylsp"), f"#!{python}\nimport pylsp\n")
    program(os.path.join(venv, "bin", "jedi-language-server"))
    found, looked = servers.lookup(os.path.join(tree, "work", "a.py"), os.path.join(tree, "work"),
                                   settings(os.path.join(venv, "bin")))
    assert found.spec.name == "pylsp" and found.argv == [os.path.join(venv, "bin", "pylsp")]
    assert looked == ["basedpyright-langserver", "pyright-langserver", "pylsp"]
    assert found.visible == [venv]  # the virtualenv, read-only in the sandbox


def test_lsp_a_node_modules_server_shows_its_node_modules_and_env_names_the_interpreter(tree):
    modules = os.path.join(tree, "tools", "node_modules")
    cli = program(os.path.join(modules, "typescript-language-server", "lib", "cli.mjs"),
                  "#!/usr/bin/env node\n")
    os.makedirs(os.path.join(modules, ".bin"))
    os.symlink(cli, os.path.join(modules, ".bin", "typescript-language-server"))
    node = program(os.path.join(tree, "node", "bin", "node"))
    path = os.pathsep.join([os.path.join(modules, ".bin"), os.path.dirname(node)])
    found, _ = servers.lookup(os.path.join(tree, "work", "a.tsx"), os.path.join(tree, "work"),
                              settings(path))
    assert found.argv[1:] == ["--stdio"]
    assert found.visible == [os.path.join(tree, "node"), modules]


def test_lsp_no_prefix_holding_the_root_and_no_program_inside_it(tree):
    root = os.path.join(tree, "work")
    held = program(os.path.join(tree, "bin", "clangd"))  # its prefix would hold the root
    found, _ = servers.lookup(os.path.join(root, "a.c"), root, settings(os.path.dirname(held)))
    assert found.visible == [held]
    inside = program(os.path.join(root, "bin", "gopls"))
    program(os.path.join(root, "go.mod"), "module x\n")
    with pytest.raises(servers.Unusable, match="inside the workspace"):
        servers.lookup(os.path.join(root, "a.go"), root, settings(os.path.dirname(inside)))


def test_lsp_configured_servers_come_first_and_built_ins_turn_off(tree):
    root = os.path.join(tree, "work")
    mine = program(os.path.join(tree, "opt", "mypy-ls"))
    program(os.path.join(tree, "opt", "pylsp"))
    configured = {"mine": {"command": [mine, "--x"], "extensions": [".PY"]}}
    path = os.path.dirname(mine)
    found, _ = servers.lookup(os.path.join(root, "a.py"), root, settings(path, servers=configured))
    assert found.spec.name == "mine" and found.argv == [mine, "--x"]
    assert servers.lookup(os.path.join(root, "a.py"), root,
                          settings(path, disabled=["pylsp"]))[0] is None
    assert servers.lookup(os.path.join(root, "a.py"), root, settings(path, enabled=False)) == (None, [])
    assert not servers.wanted(os.path.join(root, "a.txt"), settings(path))


def problem(line, message, severity=1, source="pyflakes"):
    return {"range": {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 1}},
            "message": message, "severity": severity, "source": source}


class _Conn:
    """What new_problems asks of a connection, answering from two lists."""

    name = "fake"

    def __init__(self, before, after):
        self.docs, self.published, self.answers = {}, {}, [before, after]

    def sync(self, path, text):
        return "uri", 1, 0

    def diagnostics(self, uri, version, seq, deadline):
        return self.answers.pop(0)


def test_lsp_only_new_errors_count_a_moved_one_is_not_new_and_the_report_is_bounded():
    old = "import os\na = old\n"
    new = "import os\nb = 1\nc = 2\nd = new\ne = old\na = old\n"
    before = [problem(1, "undefined name 'old'"), problem(0, "'os' imported but unused", 2)]
    after = [problem(5, "undefined name 'old'"), problem(0, "'os' imported but unused", 2),
             problem(3, "undefined name 'new'"), problem(4, "undefined name 'old'")]
    found = diagnostics.new_problems(_Conn(before, after), "/w/a.py", old, new, 0, {1})
    # 'old' on line 6 moved there with its line; the one on line 5 is new
    assert [p["range"]["start"]["line"] for p in found] == [3, 4]
    changed = diagnostics.fresh(before[:1], old, [problem(1, "undefined name 'old'")],
                                "import os\na = old + 1\n")
    assert changed == []  # the same problem on its line, whose text changed: not new
    many = [problem(i, f"undefined name 'n{i}'") for i in range(300)]
    text = diagnostics.render("/w", [("pylsp", "/w/a.py", "x\n" * 300, many)], ["slow"])
    lines = text.splitlines()
    assert lines[0] == "New problems reported by pylsp after this change:"
    assert lines[1] == "a.py:1:1: error: undefined name 'n0' (pyflakes)"
    assert lines[21:] == ["... and 280 more errors in a.py", "[diagnostics: slow]"]
