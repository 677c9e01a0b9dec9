"""Agent files as kinds of sub-agent (turns/agents/kinds.py): where they are read from,
which wins, and what their front matter means (Claude Code's files unchanged)."""

import os

from term2acp.turns.agents import kinds


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text)


def test_claude_code_files_map_to_our_tools_and_the_parents_model(tmp_path):
    root = tmp_path / "work"
    write(f"{root}/.claude/agents/tester.md", "---\nname: tester\ndescription: >\n  Runs the\n"
          "  tests\ntools: Read, Bash(pytest:*), Edit, Task\nmodel: sonnet\neffort: high\n"
          "color: blue\n---\n\nRun the tests.\n")
    write(f"{root}/.term2acp/agents/pinned.md", "---\ntools: [read_file, glob]\n"
          "model: gpt-4.1-mini\neffort: sideways\n---\nPinned.\n")
    found = kinds.discover(str(root), str(tmp_path / "config.toml"))
    tester = found["tester"]
    assert tester.project and tester.instructions == "Run the tests."
    assert tester.description == "Runs the tests"
    assert tester.tools == ("read_file", "shell", "shell_output", "shell_kill", "edit_file",
                            "apply_patch")  # Task (a sub-agent of its own) is dropped
    assert tester.model is None and tester.effort == "high"
    pinned = found["pinned"]
    assert pinned.tools == ("read_file", "glob") and pinned.model == "gpt-4.1-mini"
    assert pinned.effort is None  # not an effort: the parent's


def test_the_first_found_wins_and_built_ins_stay(tmp_path):
    root, config = tmp_path / "work", tmp_path / "conf" / "config.toml"
    write(f"{root}/.term2acp/agents/helper.md", "Project helper.\n")
    write(f"{root}/.claude/agents/helper.md", "Claude helper.\n")
    write(f"{tmp_path}/conf/agents/helper.md", "My helper.\n")
    write(f"{tmp_path}/conf/agents/mine.md", "Mine.\n")
    write(f"{tmp_path}/conf/agents/explore.md", "Not the built-in.\n")
    write(f"{tmp_path}/conf/agents/broken.md", "---\ntools: [unclosed\n---\nBody.\n")
    found = kinds.discover(str(root), str(config))
    assert found["helper"].instructions == "Project helper." and found["helper"].project
    assert found["mine"].instructions == "Mine." and not found["mine"].project
    assert found["explore"] is kinds.BUILT_IN["explore"]
    assert found["broken"].tools is None  # front matter that does not parse: no fields
    assert list(found)[:2] == ["general", "explore"]


def test_offered_keeps_the_parents_dict_when_the_kind_takes_every_tool():
    tools = {"read_file": 1, "shell": 2, "agent": 3}
    assert kinds.BUILT_IN["general"].offered(tools) is tools
    assert kinds.BUILT_IN["explore"].offered(tools) == {"read_file": 1}
