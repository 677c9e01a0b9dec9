"""grep by ripgrep (in the sandbox) answers exactly as the walker does: ignore files, a
symlink out of the root, binary, big and dotenv files, .git, every output mode, paging,
filters and paths; calls ripgrep cannot answer that way go to the walker."""

import os

import pytest

from term2acp import sandbox
from term2acp.tools import ripgrep, search
from term2acp.tools.grepping import MAX_GREP_BYTES
from term2acp.tools.search import GrepTool

pytestmark = pytest.mark.skipif(
    ripgrep.binary() is None or not sandbox.probe().available,
    reason="needs rg (the ripgrep wheel) and the sandbox")


def write(root, rel, data, mode="w"):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, mode) as fh:
        fh.write(data)


@pytest.fixture
def tree(root, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("needle outside the root\n")
    write(root, ".gitignore", "build/\n/top.log\n*.tmp\n")
    write(root, "build/out.txt", "needle built\n")
    write(root, "top.log", "needle ignored at the top\n")
    write(root, "src/top.log", "needle kept below\n")
    write(root, "src/app.py", "import os\n\ndef needle():\n    return 1\n\n\nx = 'NEEDLE'\n")
    write(root, "src/util.js", "// needle in js\nfunction f() {}\n")
    write(root, "src/deep/.gitignore", "gen/\n!keep.tmp\n*.py\n")
    write(root, "src/deep/skip.py", "needle ignored by name\n")
    write(root, "src/deep/gen/x.py", "needle generated\n")
    write(root, "src/deep/keep.tmp", "needle kept by negation\n")
    write(root, "src/deep/drop.tmp", "needle dropped\n")
    write(root, "data/blob.bin", b"needle\0binary", "wb")
    write(root, "data/huge.txt", "needle\n" * (MAX_GREP_BYTES // 7 + 1))
    write(root, ".env", "needle=secret\n")
    write(root, ".hidden/notes.md", "a needle in a hidden folder\n")
    write(root, ".git/config", "needle in git\n")
    os.symlink(outside, os.path.join(root, "src", "link"))
    os.symlink(outside / "secret.txt", os.path.join(root, "linked.txt"))
    return root


@pytest.fixture(autouse=True)
def with_ripgrep(walker_only, monkeypatch):
    monkeypatch.setattr(ripgrep, "usable", walker_only)


def both(ctx, monkeypatch, scanned_by_rg=True, **raw):
    """(ripgrep's answer, the walker's answer) to one grep call."""
    tool = GrepTool()
    args = tool.load(raw)
    usable = ripgrep.usable
    monkeypatch.setattr(search, "HEAD_START", 0.0)  # ripgrep takes every directory scan
    answered = []
    run = ripgrep.Scan.run
    monkeypatch.setattr(ripgrep.Scan, "run", lambda self, c: answered.append(run(self, c)))
    scanned = tool.run(dict(args), ctx).text
    assert bool(answered) == scanned_by_rg  # ripgrep answered (or it could not)
    monkeypatch.setattr(ripgrep, "usable", lambda *a: False)
    walked = tool.run(dict(args), ctx).text
    monkeypatch.setattr(ripgrep, "usable", usable)
    return scanned, walked


CALLS = [{}, {"output_mode": "files_with_matches"}, {"output_mode": "count"},
         {"context": 1}, {"before": 2, "after": 0}, {"ignore_case": True},
         {"head_limit": 2}, {"head_limit": 2, "offset": 2}, {"offset": 50},
         {"include": "*.py"}, {"include": "src/*.js"}, {"exclude": "deep"},
         {"exclude": "src/deep/*.tmp"}, {"type": "py"}, {"type": "py", "include": "app*"},
         {"path": "src"}, {"path": "src/deep"}, {"no_ignore": True},
         {"multiline": True, "pattern": "needle\\(\\):\\n\\s+return"},
         {"fixed_strings": True, "pattern": "needle()"}, {"pattern": "nothing-matches"}]


@pytest.mark.parametrize("extra", CALLS, ids=[str(c) for c in CALLS])
def test_ripgrep_answers_as_the_walker(tree, ctx, monkeypatch, extra):
    scanned, walked = both(ctx, monkeypatch, **{"pattern": "needle", **extra})
    if any("/" not in (extra.get(key) or "/") for key in ("type", "include")):
        # a type or name glob narrows ripgrep's scan; what it skipped is then not counted
        walked = "\n".join(line for line in walked.splitlines() if not line.startswith("[skipped"))
    assert scanned == walked
    assert "outside the root" not in scanned and "needle in git" not in scanned


def test_the_tree_is_one_ripgrep_searches(tree, ctx):
    assert ripgrep.usable(ctx, tree, False)
    assert ripgrep.usable(ctx, os.path.join(tree, "src"), False)


def test_what_both_skip_is_said(tree, ctx, monkeypatch):
    scanned, _ = both(ctx, monkeypatch, pattern="needle")
    lines = scanned.splitlines()
    assert "src/top.log:1: needle kept below" in lines
    assert "src/deep/keep.tmp:1: needle kept by negation" in lines
    assert not any(line.startswith(("build/", "top.log", "src/deep/gen", "data/blob",
                                    "data/huge", ".env", "linked")) for line in lines)
    assert "[skipped 1 binary files and 1 files over 2 MiB.]" in lines
    assert any(line.startswith("[skipped 1 credential") for line in lines)


def test_below_a_folder_with_its_own_gitignore_the_walker_searches(tree, ctx):
    write(tree, "src/deep/more/a.txt", "needle\n")
    assert not ripgrep.usable(ctx, os.path.join(tree, "src", "deep", "more"), False)
    assert ripgrep.usable(ctx, os.path.join(tree, "src", "deep", "more"), True)


def test_a_pattern_ripgrep_refuses_is_answered_by_the_walker(tree, ctx, monkeypatch):
    # RE2 takes \C (any byte); ripgrep's engine does not: the walker answers
    scanned, walked = both(ctx, monkeypatch, scanned_by_rg=False, pattern="nee\\Cle")
    assert scanned == walked and "src/app.py:3: def needle():" in scanned
