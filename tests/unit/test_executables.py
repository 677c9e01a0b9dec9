"""core/executables.py: absolute PATH entries only, answers pinned, nothing from a root."""

import os

import pytest

from term2acp.core import executables


def make_program(folder, name):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name)
    with open(path, "w") as fh:
        fh.write("#!/bin/sh\n")
    os.chmod(path, 0o755)
    return path


def test_empty_and_relative_entries_are_never_searched(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_program(tmp_path / "rel", "t2a-prog-a")
    make_program(tmp_path, "t2a-prog-a")
    good = make_program(str(tmp_path / "abs"), "t2a-prog-a")
    path = os.pathsep.join(["rel", "", ".", str(tmp_path / "abs")])
    assert executables.search_dirs(path) == [str(tmp_path / "abs")]
    assert executables.find("t2a-prog-a", path) == good


def test_an_answer_is_pinned_for_the_life_of_the_process(tmp_path):
    path = os.pathsep.join([str(tmp_path / "first"), str(tmp_path / "second")])
    later = make_program(str(tmp_path / "second"), "t2a-prog-b")
    assert executables.find("t2a-prog-b", path) == later
    make_program(str(tmp_path / "first"), "t2a-prog-b")  # appears earlier on PATH afterwards
    assert executables.find("t2a-prog-b", path) == later
    assert executables.find("t2a-missing", path) is None
    assert executables.find("../t2a-prog-b", path) is None


def test_a_program_inside_a_session_root_is_refused(tmp_path):
    root = tmp_path / "project"
    inside = make_program(str(root / "node_modules" / ".bin"), "npx")
    outside = make_program(str(tmp_path / "tools"), "npx")
    link = tmp_path / "tools" / "npx-link"
    os.symlink(inside, link)
    with pytest.raises(executables.Unsafe, match="inside the workspace"):
        executables.check(inside, [str(root)])
    with pytest.raises(executables.Unsafe):
        executables.check(str(link), [str(root)])  # a link into the root is the same
    executables.check(outside, [str(root)])
    executables.note_root(str(root))
    with pytest.raises(executables.Unsafe):
        executables.check(inside)  # noted once: refused for every later caller
