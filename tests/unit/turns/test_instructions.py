"""Where AGENTS.md files are looked for (turns/instructions.py)."""

import os

from term2acp.turns import instructions as ins


def real(path):
    return os.path.realpath(path)


def test_up_to_the_nearest_directory_holding_git(tmp_path):
    repo = tmp_path / "home" / "repo"
    work = repo / "a" / "b"
    work.mkdir(parents=True)
    (repo / ".git").mkdir()
    assert ins.candidates(work, home=tmp_path / "home") == [real(repo), real(repo / "a"), real(work)]


def test_never_above_home(tmp_path):
    home = tmp_path / "home"
    work = home / "proj"
    work.mkdir(parents=True)
    (tmp_path / ".git").mkdir()  # a repository above home does not count
    assert ins.candidates(work, home=home) == [real(work)]


def test_never_at_the_filesystem_root(tmp_path):
    assert ins.candidates("/", home=tmp_path) == []
    (tmp_path / "x").mkdir()
    assert "/" not in ins.candidates(tmp_path / "x", home="/")


def test_text_is_capped_and_nearest_comes_last(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "sub").mkdir()
    (repo / "AGENTS.md").write_text("FAR\n")
    (repo / "sub" / "AGENTS.md").write_text("NEAR\n" + "z" * (ins.FILE_CAP + 10))
    state = ins.Instructions(str(repo / "sub"), home=str(tmp_path))
    text, notice = state.load()
    assert text.index("FAR") < text.index("NEAR") and "the rest was not read" in text
    assert "Using project instructions" in notice
    assert state.load()[1] is None  # told once


def test_a_symlinked_agents_md_is_not_followed(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET\n")
    work = tmp_path / "w"
    work.mkdir()
    os.symlink(secret, work / "AGENTS.md")
    assert ins.Instructions(str(work), home=str(tmp_path)).load() == ("", None)
