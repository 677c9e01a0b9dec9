"""glob and grep over a real tmp tree: .gitignore rules, caps, hostile files."""

import json
import os
import re

import pytest

from term2acp.core.approvals import FOLDER_READ
from term2acp.core.access import AccessState
from term2acp.tools import grepping, search
from term2acp.tools.base import ToolContext, ToolError
from term2acp.tools.search import GlobTool, GrepTool
from term2acp.tools.patterns import glob_regex, path_matcher
from term2acp.tools.tree import Ignorer


@pytest.fixture
def outside(tmp_path):
    (tmp_path / "outside").mkdir()
    real = os.path.realpath(tmp_path / "outside")
    with open(os.path.join(real, "secret.py"), "w") as fh:
        fh.write("password = 'hunter2'\n")
    return real


def tree(root, spec):
    for rel, data in spec.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(data if isinstance(data, bytes) else data.encode())


def call(tool, ctx, **raw):
    args = tool.load(raw)
    plan = tool.approval(args, ctx)
    assert plan.request is None
    return tool.run(args, ctx, plan).text


def glob(ctx, pattern, **raw):
    return call(GlobTool(), ctx, pattern=pattern, **raw).splitlines()


def grep(ctx, pattern, **raw):
    return call(GrepTool(), ctx, pattern=pattern, **raw).splitlines()


@pytest.mark.parametrize("pattern, hits, misses", [
    ("*.py", ["a.py", "x/b.py"], ["a.pyc", "x/b.py/c"]),
    ("src/*.py", ["src/a.py"], ["src/x/a.py", "a/src/a.py"]),
    ("**/*.py", ["a.py", "x/y/a.py"], ["a.pyc"]),
    ("src/**", ["src/a", "src/x/y"], ["srcx/a"]),
    ("a/**/b", ["a/b", "a/x/y/b"], ["ab", "a/xb"]),
    ("*.{ts,tsx}", ["a.ts", "a.tsx"], ["a.t", "a.js"]),
    ("file?.[ch]", ["file1.c", "fileX.h"], ["file12.c", "file1.o"]),
    ("[!a]*", ["b"], ["a"]),
])
def test_glob_regex_translation(pattern, hits, misses):
    matches = path_matcher(pattern)
    assert all(matches(rel) for rel in hits), pattern
    assert not any(matches(rel) for rel in misses), pattern


def test_glob_regex_escapes_specials():
    assert re.fullmatch(glob_regex("a+b(1).txt"), "a+b(1).txt")
    assert not re.fullmatch(glob_regex("a.txt"), "abtxt")


def test_ignorer_rules(tmp_path):
    base = os.path.realpath(tmp_path)
    (tmp_path / ".gitignore").write_text(
        "# comment\n*.log\n!keep.log\nbuild/\n/top.txt\ndocs/*.tmp\n\\#hash\n**/cache\n")
    ignorer = Ignorer().child(base)
    path = lambda rel: os.path.join(base, rel)  # noqa: E731
    assert ignorer.ignored(path("x/debug.log"), False)
    assert not ignorer.ignored(path("x/keep.log"), False)
    assert ignorer.ignored(path("a/build"), True)
    assert not ignorer.ignored(path("a/build"), False)  # dir-only rule, this is a file
    assert ignorer.ignored(path("top.txt"), False)
    assert not ignorer.ignored(path("sub/top.txt"), False)  # anchored
    assert ignorer.ignored(path("docs/a.tmp"), False)
    assert not ignorer.ignored(path("other/docs/a.tmp"), False)
    assert ignorer.ignored(path("#hash"), False)
    assert ignorer.ignored(path("deep/er/cache"), True)
    assert not ignorer.ignored(path("comment"), False)


def test_glob_finds_files_sorted_and_marks_directories(ctx, root):
    tree(root, {"b.py": "", "a/c.py": "", "a/d.txt": "", "pkg.py/x": ""})
    assert glob(ctx, "**/*.py") == ["a/c.py", "b.py", "pkg.py/"]
    assert glob(ctx, "**/*") == ["a/", "a/c.py", "a/d.txt", "b.py", "pkg.py/", "pkg.py/x"]
    assert glob(ctx, "*.txt", path="a") == ["a/d.txt"]


def test_glob_respects_gitignore_nested_and_negation(ctx, root):
    tree(root, {
        ".gitignore": "*.log\nbuild/\n!important.log\n",
        "app.log": "", "important.log": "", "build/out.py": "", "src/a.py": "",
        "src/.gitignore": "generated_*.py\n", "src/generated_x.py": "",
        ".git/config": "", ".git/hooks/h.py": "",
    })
    assert glob(ctx, "**/*") == [".gitignore", "important.log", "src/", "src/.gitignore",
                                 "src/a.py"]
    assert glob(ctx, "*.py", path="src") == ["src/a.py"]  # root .gitignore still applies
    everything = glob(ctx, "**/*", no_ignore=True)
    assert "app.log" in everything and "build/out.py" in everything
    assert not any(p.startswith(".git/") for p in everything)  # .git is always skipped


def test_glob_caps_results(ctx, root):
    tree(root, {f"f{i:03}.txt": "" for i in range(30)})
    lines = glob(ctx, "*.txt", max_results=10)
    assert lines[:10] == [f"f{i:03}.txt" for i in range(10)]
    assert lines[10] == "[20 more matches not shown; narrow the pattern or raise max_results.]"


def test_glob_does_not_follow_symlinked_directories(ctx, root, outside):
    os.symlink(outside, os.path.join(root, "out"))
    assert glob(ctx, "**/*") == ["out"]
    assert glob(ctx, "**/secret.py") == ["No paths match **/secret.py in .."]


def test_glob_refuses_parent_and_absolute_patterns(ctx):
    for pattern in ("../*.py", "/etc/*"):
        with pytest.raises(ToolError, match="put the directory to search in path"):
            call(GlobTool(), ctx, pattern=pattern)


def test_glob_outside_asks_for_the_folder(ctx, outside):
    tool = GlobTool()
    args = tool.load({"pattern": "*.py", "path": outside})
    plan = tool.approval(args, ctx)
    assert (plan.request.variant, plan.request.path) == (FOLDER_READ, outside)
    assert tool.run(args, ctx, plan).text == os.path.join(outside, "secret.py")


def test_grep_reports_path_line_text(ctx, root):
    tree(root, {"a.py": "import os\nx = 1\nimport sys\n", "b/c.py": "Import nothing\n"})
    assert grep(ctx, r"^import \w+") == ["a.py:1: import os", "a.py:3: import sys"]
    assert grep(ctx, "import", ignore_case=True, path="b") == ["b/c.py:1: Import nothing"]


def test_grep_fixed_strings_and_invalid_regex(ctx, root):
    tree(root, {"a.txt": "call f(x) here\n"})
    assert grep(ctx, "f(x", fixed_strings=True) == ["a.txt:1: call f(x) here"]
    with pytest.raises(ToolError, match=r"expression 'f\(x'.*missing \).*fixed_strings"):
        grep(ctx, "f(x")


def test_grep_include_exclude_and_gitignore(ctx, root):
    tree(root, {".gitignore": "dist/\n", "a.py": "hit\n", "a.md": "hit\n", "dist/a.py": "hit\n",
                "vendor/b.py": "hit\n"})
    assert grep(ctx, "hit") == ["a.md:1: hit", "a.py:1: hit", "vendor/b.py:1: hit"]
    assert grep(ctx, "hit", include="*.py") == ["a.py:1: hit", "vendor/b.py:1: hit"]
    assert grep(ctx, "hit", include="*.{md,py}", exclude="vendor") == ["a.md:1: hit", "a.py:1: hit"]
    assert "dist/a.py:1: hit" in grep(ctx, "hit", no_ignore=True)


def test_grep_skips_binary_and_huge_files_and_decodes_non_utf8(ctx, root):
    tree(root, {"bin.dat": b"needle\x00\x01", "latin.txt": "needle caf\xe9\n".encode("latin-1")})
    with open(os.path.join(root, "huge.txt"), "wb") as fh:
        fh.truncate(search.MAX_GREP_BYTES + 1)
    assert grep(ctx, "needle") == ["latin.txt:1: needle caf\ufffd",
                                   "[skipped 1 binary files and 1 files over 2 MiB.]"]


def test_grep_caps_matches_and_cuts_long_lines(ctx, root):
    tree(root, {"many.txt": "match\n" * 500, "long.txt": "match" + "x" * 1000 + "\n"})
    lines = grep(ctx, "match")
    assert len(lines) == search.MAX_MATCHES + 1
    assert lines[0] == "long.txt:1: match" + "x" * (grepping.MAX_LINE_CHARS - 5) + "…"
    assert lines[-1].startswith("[showing lines 1-200; more follow: call again with offset=200")


def test_grep_does_not_follow_symlinks_out_of_the_root(ctx, root, outside):
    os.symlink(os.path.join(outside, "secret.py"), os.path.join(root, "link.py"))
    os.symlink(outside, os.path.join(root, "linkdir"))
    assert grep(ctx, "hunter2") == ["No matches for hunter2 in .."]


def test_grep_single_file_and_symlinked_path_needs_approval(ctx, root, outside):
    tree(root, {"one.txt": "a\nb\n"})
    assert grep(ctx, "b", path="one.txt") == ["one.txt:2: b"]
    os.symlink(os.path.join(outside, "secret.py"), os.path.join(root, "link.py"))
    tool = GrepTool()
    args = tool.load({"pattern": "hunter2", "path": "link.py"})
    assert tool.approval(args, ctx).request.path == outside
    fresh = ToolContext(ctx.root, "s", "c2", AccessState(ctx.root), ctx.settings, [].append)
    with pytest.raises(ToolError, match="not approved"):
        tool.run(args, fresh)  # no approval check ran for this call


def test_grep_never_blocks_on_fifos(ctx, root):
    os.mkfifo(os.path.join(root, "pipe"))
    os.mkfifo(os.path.join(root, ".gitignore"))
    tree(root, {"a.txt": "x\n"})
    assert grep(ctx, "x") == ["a.txt:1: x"]
    assert glob(ctx, "*") == [".gitignore", "a.txt", "pipe"]
    with pytest.raises(ToolError, match="not a regular file"):
        grep(ctx, "x", path="pipe")


def test_grep_missing_path(ctx):
    with pytest.raises(ToolError, match="does not exist"):
        grep(ctx, "x", path="nowhere")


@pytest.mark.parametrize("tool", [GlobTool(), GrepTool()])
def test_search_tools_spec_describes_every_parameter(tool):
    spec = json.loads(json.dumps(tool.spec()))
    assert tool.kind == "search" and spec["description"]
    assert all(prop.get("description") for prop in spec["parameters"]["properties"].values())


# ---------------------------------------------------------------- ripgrep-class grep
CODE = {"a.py": "import os\n\ndef f():\n    return 1\n\n\ndef g():\n    return 2\n",
        "b.js": "function f() {\n  return 1;\n}\n", "c.txt": "def nothing\n"}


def test_grep_output_modes(ctx, root):
    tree(root, CODE)
    assert grep(ctx, "return", output_mode="files_with_matches") == ["a.py", "b.js"]
    assert grep(ctx, "def ", output_mode="count") == ["a.py: 2", "c.txt: 1"]
    assert grep(ctx, "def ", output_mode="count", type="py") == ["a.py: 2"]


def test_grep_context_lines_and_group_separators(ctx, root):
    tree(root, CODE)
    assert grep(ctx, "return", path="a.py", context=1) == [
        "a.py-3- def f():", "a.py:4:     return 1", "a.py-5- ",
        "--", "a.py-7- def g():", "a.py:8:     return 2"]
    assert grep(ctx, "def f", before=0, after=1, type="py") == [
        "a.py:3: def f():", "a.py-4-     return 1"]
    assert grep(ctx, "return", context=1, type="js") == [
        "b.js-1- function f() {", "b.js:2:   return 1;", "b.js-3- }"]


def test_grep_multiline_spans_lines_and_prints_each(ctx, root):
    tree(root, CODE)
    assert grep(ctx, r"def g\(\):\n\s+return", multiline=True) == [
        "a.py:7: def g():", "a.py:8:     return 2"]
    assert grep(ctx, r"def g\(\):\n\s+return") == ["No matches for def g\\(\\):\\n\\s+return in .."]
    assert grep(ctx, r"f\(\).*\n.*return", multiline=True, output_mode="count") == [
        "a.py: 1", "b.js: 1"]


def test_grep_multiline_finds_a_match_across_slices(ctx, root):
    body = "".join(f"line {i}\n" for i in range(40_000)) + "BEGIN\nmiddle\nEND\n" + "x\n" * 10
    tree(root, {"big.txt": body})
    assert grep(ctx, r"BEGIN\nmiddle\nEND", multiline=True) == [
        "big.txt:40001: BEGIN", "big.txt:40002: middle", "big.txt:40003: END"]


def test_grep_head_limit_and_offset_page_through(ctx, root):
    tree(root, {f"f{i:02}.txt": "hit\n" for i in range(12)})
    first = grep(ctx, "hit", output_mode="files_with_matches", head_limit=5)
    assert first[:5] == [f"f{i:02}.txt" for i in range(5)]
    assert "call again with offset=5" in first[5]
    second = grep(ctx, "hit", output_mode="files_with_matches", head_limit=5, offset=10)
    assert second == ["f10.txt", "f11.txt"]
    assert grep(ctx, "hit", offset=50) == ["No results after offset 50 (12 in all)."]


def test_grep_unknown_type_lists_the_known_ones(ctx, root):
    tree(root, CODE)
    with pytest.raises(ToolError, match="unknown file type 'cobol'; known types: c, cpp"):
        grep(ctx, "x", type="cobol")


def test_glob_newest_first(ctx, root):
    tree(root, {"old.py": "", "mid.py": "", "new.py": "", "x/newest.txt": ""})
    for age, name in enumerate(("new.py", "mid.py", "old.py")):
        os.utime(os.path.join(root, name), (1_000_000 - age * 100, 1_000_000 - age * 100))
    assert glob(ctx, "*.py", sort="newest") == ["new.py", "mid.py", "old.py"]
    assert glob(ctx, "*.py", sort="newest", max_results=1) == [
        "new.py", "[2 more matches not shown; narrow the pattern or raise max_results.]"]
    assert glob(ctx, "*.py") == ["mid.py", "new.py", "old.py"]


def test_the_walks_dot_name_shortcut_covers_every_name_wide_credential_glob():
    from term2acp.core.sensitive import NAME_GLOBS
    assert all(g.startswith(".") for g in NAME_GLOBS)  # tree.TreeWalk checks only dot-names


GLOB_CASES = [("**/*.py", {}), ("*.py", {}), ("**/*", {}), ("src/**/*.py", {}),
              ("**/linked*", {}), ("**/gen", {}), ("*.py", {"path": "src"}),
              ("**/*.env", {}), ("**/*.py", {"no_ignore": True}),
              ("**/**/*.py", {"max_results": 2}), ("**/*.txt", {"sort": "newest"})]

GLOB_NOTE = ("[skipped 2 credential or shell start-up files (e.g. ~/.ssh, .env, ~/.bashrc); "
             "read_file asks the user for them.]")
GLOB_ANSWERS = [
    ["a.py", "dir.py/", "linked.py", "src/app.py", GLOB_NOTE],
    ["a.py", "dir.py/", "linked.py", "src/app.py", GLOB_NOTE],
    [".gitignore", "a.py", "dir.py/", "dir.py/inner.txt", "keep.log", "linked.py", "src/",
     "src/app.py", "src/gen/", "src/gen/.gitignore", "src/gen/notes.txt", "src/linked", "web/",
     "web/x.env", "z.txt", GLOB_NOTE],
    ["src/app.py", GLOB_NOTE],
    ["linked.py", "src/linked", GLOB_NOTE],
    ["src/gen/", GLOB_NOTE],
    ["src/app.py"],
    ["web/x.env", GLOB_NOTE],
    ["a.py", "build/out.py", "dir.py/", "linked.py", "src/app.py", "src/gen/model.py", GLOB_NOTE],
    ["a.py", "dir.py/", "[2 more matches not shown; narrow the pattern or raise max_results.]",
     GLOB_NOTE],
    ["z.txt", "src/gen/notes.txt", "dir.py/inner.txt", GLOB_NOTE],
]


def test_glob_answers_as_before_whatever_decides_first(ctx, root, outside):
    """Names decide before the ignore rules now (glob's fast path): the same paths, notes
    and order as when every entry was checked against the rules first (answers recorded
    with the walker before that change)."""
    tree(root, {
        ".gitignore": "build/\n*.log\n!keep.log\n", "build/out.py": "", "app.log": "",
        "keep.log": "", "a.py": "", "src/app.py": "", "src/gen/.gitignore": "*.py\n",
        "src/gen/model.py": "", "src/gen/notes.txt": "", "web/.env": "S=1", "web/x.env": "",
        "web/.env.py": "", ".git/h.py": "", "dir.py/inner.txt": "", "z.txt": ""})
    os.symlink(outside, os.path.join(root, "src", "linked"))
    os.symlink("a.py", os.path.join(root, "linked.py"))
    for age, name in enumerate(("z.txt", "src/gen/notes.txt", "dir.py/inner.txt")):
        os.utime(os.path.join(root, name), (1_000_000 - age * 100, 1_000_000 - age * 100))
    answers = [glob(ctx, pattern, **raw) for pattern, raw in GLOB_CASES]
    assert answers == GLOB_ANSWERS


NAMES = ["a.rs", "b.rs.bak", ".rs", "Makefile", "makefile", "test_x", "xtest_", "mycache.txt",
         "cache", "a.ts", "a.tsx", "a.t", "x.py", "x.", "a", "x\udcff.rs", "\ufffd.rs", ".env",
         "a*b", "x\nrs"]


@pytest.mark.parametrize("glob", ["*.rs", "Makefile", "test_*", "*cache*", "*.{ts,tsx}",
                                  "**.py", "*.", "{a,b}", ".*", "*.{rs,}", "{*.rs,*.py}"])
def test_a_name_globs_string_test_says_what_re2_says(glob):
    from term2acp.tools.patterns import name_test

    test, matches = name_test(glob), path_matcher(glob)
    assert test is not None
    assert [bool(test(name)) for name in NAMES] == [matches(name) for name in NAMES]


@pytest.mark.parametrize("glob", ["*", "x?y", "[ab]", "*\\*", "{a}", "*.{a,b*}", "a*b",
                                  "*\udcff", "*\ufffd"])
def test_other_name_globs_are_left_to_re2(glob):
    from term2acp.tools.patterns import name_test

    assert name_test(glob) is None
