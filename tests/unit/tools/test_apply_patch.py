"""apply_patch: the Codex format, hunks found by context, all-or-nothing across files."""

import os

import pytest

from term2acp.core.approvals import OUTSIDE_EDIT
from term2acp.tools import changeset
from term2acp.tools.apply_patch import ApplyPatchTool
from term2acp.tools.base import ToolError
from term2acp.tools.patch import PatchError, apply_hunks, parse


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", newline="") as fh:
        fh.write(text)
    return path


def read(path):
    with open(path, newline="") as fh:
        return fh.read()


def tree(root):
    out = {}
    for base, _dirs, names in os.walk(root):
        for name in names:
            out[os.path.relpath(os.path.join(base, name), root)] = read(os.path.join(base, name))
    return out


def patch(*lines):
    return "\n".join(("*** Begin Patch",) + lines + ("*** End Patch",)) + "\n"


def apply(ctx, text):
    tool = ApplyPatchTool()
    args = tool.load({"input": text})
    plan = tool.approval(args, ctx)
    assert plan.request is None
    return tool.run(args, ctx, plan)


APP = "import os\n\n\ndef greet():\n    print('hi')\n    return 1\n\n\ndef leave():\n    return 2\n"


def test_one_patch_adds_updates_deletes_and_moves(ctx, root):
    write(root, "app.py", APP)
    write(root, "old.txt", "bye\n")
    write(root, "pkg/mod.py", "x = 1\ny = 2\n")
    result = apply(ctx, patch(
        "*** Add File: docs/new.md",
        "+# New",
        "+",
        "+text",
        "*** Update File: app.py",
        "@@ def greet():",
        "-    print('hi')",
        "+    print('hello')",
        "     return 1",
        "@@",
        " def leave():",
        "-    return 2",
        "+    return 3",
        "*** Delete File: old.txt",
        "*** Update File: pkg/mod.py",
        "*** Move to: pkg/renamed.py",
        " x = 1",
        "-y = 2",
        "+y = 3",
    ))
    assert not result.is_error
    assert tree(root) == {
        "docs/new.md": "# New\n\ntext\n",
        "app.py": APP.replace("print('hi')", "print('hello')").replace("return 2", "return 3"),
        "pkg/renamed.py": "x = 1\ny = 3\n"}
    kinds = [(item["path"], item["old"] is None, item["new"] is None, item.get("old_path"))
             for item in result.content]
    assert kinds == [(os.path.join(root, "docs/new.md"), True, False, None),
                     (os.path.join(root, "app.py"), False, False, None),
                     (os.path.join(root, "old.txt"), False, True, None),
                     (os.path.join(root, "pkg/renamed.py"), False, False,
                      os.path.join(root, "pkg/mod.py"))]
    assert "A docs/new.md" in result.text and "R pkg/mod.py -> pkg/renamed.py" in result.text


def test_a_hunk_that_does_not_apply_changes_nothing_and_says_which(ctx, root):
    write(root, "app.py", APP)
    write(root, "b.txt", "one\n")
    before = tree(root)
    with pytest.raises(ToolError) as err:
        apply(ctx, patch(
            "*** Delete File: b.txt",
            "*** Add File: c.txt",
            "+c",
            "*** Update File: app.py",
            "@@",
            " def greet():",
            "-    print('hi')",
            "+    print('yo')",
            "@@",
            " def leave():",
            "-    return 7",
            "+    return 8",
        ))
    message = str(err.value)
    assert "app.py, hunk 2" in message and "Nothing was changed" in message
    assert "'    return 7'" in message and "'    return 2'" in message  # expected vs found
    assert "line 10" in message
    assert tree(root) == before


def test_hunks_tolerate_trailing_whitespace_and_say_so(ctx, root):
    write(root, "a.py", "def f():   \n    return 1\n")
    result = apply(ctx, patch("*** Update File: a.py", "@@", " def f():", "-    return 1",
                              "+    return 2"))
    assert read(os.path.join(root, "a.py")) == "def f():   \n    return 2\n"
    assert "hunk 1 matched only when whitespace" in result.text


def test_crlf_files_keep_their_line_endings(ctx, root):
    write(root, "w.txt", "a\r\nb\r\nc\r\n")
    apply(ctx, patch("*** Update File: w.txt", " a", "-b", "+B", " c"))
    assert read(os.path.join(root, "w.txt")) == "a\r\nB\r\nc\r\n"


def test_end_of_file_hunk_and_pure_addition(ctx, root):
    write(root, "e.txt", "x\ny\nx\ny\n")
    apply(ctx, patch("*** Update File: e.txt", "@@", " x", "-y", "+z", "*** End of File"))
    assert read(os.path.join(root, "e.txt")) == "x\ny\nx\nz\n"
    apply(ctx, patch("*** Update File: e.txt", "@@", "+tail"))
    assert read(os.path.join(root, "e.txt")) == "x\ny\nx\nz\ntail\n"


@pytest.mark.parametrize("text, needle", [
    ("no envelope", "must start with the line '*** Begin Patch'"),
    ("*** Begin Patch\n*** Add File: a\n+a\n", "must end with the line '*** End Patch'"),
    (patch("*** Frobnicate File: a"), "patch line 2: expected '*** Add File: '"),
    (patch("*** Add File: a", "oops"), "patch line 3: every line of an added file starts"),
    (patch("*** Update File: a", "@@", "?x"), "hunk line starts with ' ' (context)"),
    (patch("*** Update File: a"), "has no hunks"),
    (patch("*** Update File: a", "@@", " same"), "changes nothing"),
    (patch("*** Delete File: a", "*** Add File: a", "+x"), "appears in two operations"),
    (patch(), "no file operations"),
])
def test_parse_errors_name_the_line(text, needle):
    with pytest.raises(PatchError) as err:
        parse(text)
    assert needle in str(err.value)


def test_unified_ranges_are_bare_headers_and_a_missing_header_is_named():
    ops = parse(patch("*** Update File: a", "@@ -1,2 +1,2 @@", " a", "-b", "+c"))
    assert ops[0].hunks[0].header == ""
    hunk = parse(patch("*** Update File: a", "@@ class Missing:", " a", "-b", "+c"))[0].hunks[0]
    with pytest.raises(PatchError) as err:
        apply_hunks("a\nb\n", [hunk], "a")
    assert "'@@ class Missing:' line was not found" in str(err.value)


def test_add_over_an_existing_file_and_update_of_a_missing_one_fail(ctx, root):
    write(root, "here.txt", "x\n")
    with pytest.raises(ToolError, match="already exists"):
        apply(ctx, patch("*** Add File: here.txt", "+y"))
    with pytest.raises(ToolError, match="does not exist"):
        apply(ctx, patch("*** Update File: gone.txt", "@@", "-a", "+b"))
    with pytest.raises(ToolError, match="target of two operations"):
        apply(ctx, patch("*** Update File: here.txt", "-x", "+y",
                         "*** Delete File: ./here.txt"))
    assert read(os.path.join(root, "here.txt")) == "x\n"


def test_an_outside_target_asks_with_every_diff(ctx, root, tmp_path):
    outside = os.path.realpath(tmp_path / "outside")
    os.mkdir(outside)
    write(outside, "o.txt", "old\n")
    tool = ApplyPatchTool()
    args = tool.load({"input": patch("*** Add File: in.txt", "+in",
                                     f"*** Update File: {outside}/o.txt", "-old", "+new")})
    plan = tool.approval(args, ctx)
    assert plan.request.variant == OUTSIDE_EDIT
    assert plan.request.path == os.path.join(outside, "o.txt")
    assert len(plan.request.content) == 2
    with pytest.raises(ToolError, match="not approved"):
        tool.run(args, ctx)  # without the allowed plan: refused, nothing written
    assert not os.path.exists(os.path.join(root, "in.txt"))
    tool.run(args, ctx, plan)  # the allowed plan
    assert read(os.path.join(outside, "o.txt")) == "new\n"


def test_a_second_outside_target_is_asked_before_writing(ctx, root, tmp_path):
    outside = os.path.realpath(tmp_path / "outside")
    os.mkdir(outside)
    write(outside, "a.txt", "a\n")
    write(outside, "b.txt", "b\n")
    asked = []
    ctx._approve = lambda request: asked.append(request.path) or False
    tool = ApplyPatchTool()
    args = tool.load({"input": patch(f"*** Delete File: {outside}/a.txt",
                                     f"*** Delete File: {outside}/b.txt")})
    plan = tool.approval(args, ctx)
    assert plan.request.path.endswith("a.txt") and len(plan.later) == 1
    with pytest.raises(ToolError, match="did not allow changing"):
        tool.run(args, ctx, plan)
    assert asked == [os.path.join(outside, "b.txt")]
    assert sorted(os.listdir(outside)) == ["a.txt", "b.txt"]


def test_a_failed_commit_undoes_the_files_already_committed(ctx, root, monkeypatch):
    write(root, "a.txt", "a\n")
    write(root, "b.txt", "b\n")
    real_commit = changeset._Change.commit

    def commit(change):
        if change.name == "b.txt":
            raise OSError(28, "No space left on device")
        real_commit(change)
    monkeypatch.setattr(changeset._Change, "commit", commit)
    with pytest.raises(ToolError, match="nothing was changed"):
        apply(ctx, patch("*** Delete File: a.txt", "*** Add File: c.txt", "+c",
                         "*** Update File: b.txt", "-b", "+B"))
    assert tree(root) == {"a.txt": "a\n", "b.txt": "b\n"}


def test_a_file_changed_after_the_check_writes_nothing(ctx, root):
    write(root, "a.txt", "a\n")
    write(root, "b.txt", "b\n")
    tool = ApplyPatchTool()
    args = tool.load({"input": patch("*** Update File: a.txt", "-a", "+A",
                                     "*** Update File: b.txt", "-b", "+B")})
    plan = tool.approval(args, ctx)
    write(root, "b.txt", "b changed meanwhile\n")
    with pytest.raises(ToolError, match="changed after it was read"):
        tool.run(args, ctx, plan)
    assert tree(root) == {"a.txt": "a\n", "b.txt": "b changed meanwhile\n"}


def test_a_symlink_swapped_in_after_the_check_writes_nothing(ctx, root, tmp_path):
    outside = os.path.realpath(tmp_path / "outside")
    os.mkdir(outside)
    write(root, "d/a.txt", "a\n")
    tool = ApplyPatchTool()
    args = tool.load({"input": patch("*** Update File: d/a.txt", "-a", "+A")})
    plan = tool.approval(args, ctx)
    os.rename(os.path.join(root, "d"), os.path.join(root, "d2"))
    write(outside, "a.txt", "a\n")
    os.symlink(outside, os.path.join(root, "d"))
    with pytest.raises(ToolError):
        tool.run(args, ctx, plan)
    assert read(os.path.join(outside, "a.txt")) == "a\n"


def test_offered_to_every_model_as_an_edit(ctx):
    from term2acp.tools.registry import builtin_tools
    tool = next(t for t in builtin_tools() if t.name == "apply_patch")
    assert tool.kind == "edit"
    assert tool.spec()["parameters"]["required"] == ["input"]
