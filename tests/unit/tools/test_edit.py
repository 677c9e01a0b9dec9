"""create_file and edit_file: diffs, atomic all-or-nothing writes, containment races."""

import json
import os
import stat

import pytest

from term2acp.core.approvals import OUTSIDE_EDIT
from term2acp.tools import edit, paths
from term2acp.tools.base import ToolError
from term2acp.tools.edit import CreateFileTool, EditFileTool, apply_edits

SECRET = "outside content\n"


@pytest.fixture
def outside(tmp_path):
    (tmp_path / "outside").mkdir()
    real = os.path.realpath(tmp_path / "outside")
    with open(os.path.join(real, "target.txt"), "w") as fh:
        fh.write(SECRET)
    return real


def write(root, rel, data):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data if isinstance(data, bytes) else data.encode())
    return path


def content(path):
    with open(path, "rb") as fh:
        return fh.read().decode()


def snapshot(directory):
    """Every path and content below ``directory``: to prove nothing was written there."""
    out = {}
    for base, dirs, names in os.walk(directory):
        for name in dirs + names:
            path = os.path.join(base, name)
            out[path] = None if os.path.isdir(path) else open(path, "rb").read()
    return out


def call(tool, ctx, **raw):
    args = tool.load(raw)
    plan = tool.approval(args, ctx)
    assert plan.request is None
    return tool.run(args, ctx, plan)


def edits(*pairs, replace_all=False):
    return [{"old_text": old, "new_text": new, "replace_all": replace_all} for old, new in pairs]


def test_create_file_makes_parents_and_reports_a_new_file_diff(ctx, root):
    result = call(CreateFileTool(), ctx, path="a/b/c.py", content="print(1)\n")
    path = os.path.join(root, "a/b/c.py")
    assert content(path) == "print(1)\n"
    assert result.content == [{"type": "diff", "path": path, "old": None, "new": "print(1)\n"}]
    assert result.locations == [{"path": path, "line": 1}]
    assert "Created a/b/c.py (1 lines)" in result.text
    assert sorted(os.listdir(os.path.join(root, "a/b"))) == ["c.py"]  # no temp file left


def test_create_file_refuses_to_overwrite_and_says_how(ctx, root):
    path = write(root, "keep.txt", "original\n")
    with pytest.raises(ToolError, match="overwrite=true") as info:
        call(CreateFileTool(), ctx, path="keep.txt", content="new\n")
    assert "edit_file" in str(info.value)
    assert content(path) == "original\n"


def test_create_file_overwrite_keeps_mode_and_shows_real_old_text(ctx, root):
    path = write(root, "run.sh", "echo old\n")
    os.chmod(path, 0o750)
    result = call(CreateFileTool(), ctx, path="run.sh", content="echo new\n", overwrite=True)
    assert content(path) == "echo new\n"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o750
    assert result.content[0]["old"] == "echo old\n"
    assert result.text.startswith("Overwrote run.sh")


def test_create_file_into_a_directory_path_or_through_a_file_fails(ctx, root):
    write(root, "plain", "x")
    with pytest.raises(ToolError, match="is a directory"):
        call(CreateFileTool(), ctx, path=".", content="x")
    with pytest.raises(ToolError, match="not a directory"):
        call(CreateFileTool(), ctx, path="plain/child.txt", content="x")


@pytest.mark.parametrize("how", ["absolute", "traversal", "dir-symlink"])
def test_create_file_outside_asks_with_the_real_diff(ctx, root, outside, how):
    os.symlink(outside, os.path.join(root, "out"))
    path = {"absolute": os.path.join(outside, "new.txt"), "traversal": "../outside/new.txt",
            "dir-symlink": "out/new.txt"}[how]
    tool = CreateFileTool()
    args = tool.load({"path": path, "content": "hello\n"})
    target = os.path.join(outside, "new.txt")
    plan = tool.approval(args, ctx)
    request = plan.request
    assert (request.variant, request.path) == (OUTSIDE_EDIT, target)
    assert request.content == [{"type": "diff", "path": target, "old": None, "new": "hello\n"}]
    tool.run(args, ctx, plan)  # the user allowed it once
    assert content(target) == "hello\n"


def test_create_file_outside_without_approval_writes_nothing(ctx, outside):
    before = snapshot(outside)
    tool = CreateFileTool()
    with pytest.raises(ToolError, match="outside the workspace and this call was not approved"):
        tool.run(tool.load({"path": os.path.join(outside, "x.txt"), "content": "x"}), ctx)
    assert snapshot(outside) == before


def test_create_file_with_folder_grant_needs_no_approval(ctx, outside):
    ctx.access.allow_edit_folder(outside)
    call(CreateFileTool(), ctx, path=os.path.join(outside, "granted.txt"), content="ok")
    assert content(os.path.join(outside, "granted.txt")) == "ok"


def test_create_file_symlink_swapped_between_approval_and_run_writes_nothing(ctx, root, outside):
    os.mkdir(os.path.join(root, "real"))
    link = os.path.join(root, "dir")
    os.symlink(os.path.join(root, "real"), link)
    tool = CreateFileTool()
    args = tool.load({"path": "dir/new.txt", "content": "payload"})
    plan = tool.approval(args, ctx)
    assert plan.request is None  # inside the root at check time
    os.unlink(link)
    os.symlink(outside, link)
    before = snapshot(outside)
    with pytest.raises(ToolError, match="changed after the permission check"):
        tool.run(args, ctx, plan)
    assert snapshot(outside) == before


def test_write_refuses_a_directory_swapped_for_a_symlink_after_resolution(ctx, root, outside,
                                                                          monkeypatch):
    os.mkdir(os.path.join(root, "dir"))
    stale = os.path.join(root, "dir", "new.txt")
    tool = CreateFileTool()
    args = tool.load({"path": "dir/new.txt", "content": "payload"})
    os.rename(os.path.join(root, "dir"), os.path.join(root, "moved"))
    os.symlink(outside, os.path.join(root, "dir"))
    # The race lost inside run(): resolution still answers with the old, inside path.
    monkeypatch.setattr(paths, "resolve", lambda root_, path: stale)
    before = snapshot(outside)
    with pytest.raises(ToolError, match="symlink"):
        tool.run(args, ctx)
    assert snapshot(outside) == before


def test_edit_file_applies_edits_in_order_and_reports_whole_file_diff(ctx, root):
    original = "def f():\n    return 1\n\n\ndef g():\n    return 2\n"
    path = write(root, "m.py", original)
    result = call(EditFileTool(), ctx, path="m.py",
                  edits=edits(("return 2", "return 3"), ("return 3", "return 4")))
    expected = original.replace("return 2", "return 4")
    assert content(path) == expected
    assert result.content == [{"type": "diff", "path": path, "old": original, "new": expected}]
    assert result.locations == [{"path": path, "line": 6}]
    assert "2 edits, 2 replacements; first change at line 6" in result.text


def test_edit_file_replace_all(ctx, root):
    path = write(root, "a.txt", "x = 1\nx = 1\nx = 1\n")
    result = call(EditFileTool(), ctx, path="a.txt",
                  edits=edits(("x = 1", "x = 2"), replace_all=True))
    assert content(path) == "x = 2\nx = 2\nx = 2\n"
    assert "3 replacements" in result.text


def test_edit_file_ambiguous_match_counts_and_writes_nothing(ctx, root):
    path = write(root, "a.txt", "foo\nbar\nfoo\n")
    with pytest.raises(ToolError, match=r"matches 2 places in a.txt \(lines 1, 3\)") as info:
        call(EditFileTool(), ctx, path="a.txt", edits=edits(("foo", "baz")))
    assert "replace_all" in str(info.value) and "surrounding" in str(info.value)
    assert content(path) == "foo\nbar\nfoo\n"


def test_edit_file_no_match_in_a_later_edit_applies_nothing(ctx, root):
    path = write(root, "a.txt", "alpha\nbeta\n")
    mtime = os.stat(path).st_mtime_ns
    with pytest.raises(ToolError, match="edit 2: old_text was not found in a.txt. Nothing was"):
        call(EditFileTool(), ctx, path="a.txt", edits=edits(("alpha", "ALPHA"), ("gamma", "x")))
    assert content(path) == "alpha\nbeta\n"
    assert os.stat(path).st_mtime_ns == mtime
    assert os.listdir(root) == ["a.txt"]


def test_edit_file_no_match_hints_at_whitespace(ctx, root):
    write(root, "a.py", "if x:\n    y()\n")
    with pytest.raises(ToolError, match="different whitespace"):
        call(EditFileTool(), ctx, path="a.py", edits=edits(("if x:\n  y()", "z")))


def test_edit_file_keeps_crlf_line_endings(ctx, root):
    path = write(root, "win.txt", "a\r\nb\r\nc\r\n")
    call(EditFileTool(), ctx, path="win.txt", edits=edits(("a\nb", "A\nB")))
    assert content(path) == "A\r\nB\r\nc\r\n"


def test_edit_file_validation_and_missing_file(ctx, root):
    tool = EditFileTool()
    with pytest.raises(ToolError, match="edits"):
        tool.load({"path": "a.txt", "edits": []})
    with pytest.raises(ToolError, match="old_text"):
        tool.load({"path": "a.txt", "edits": [{"old_text": "", "new_text": "x"}]})
    with pytest.raises(ToolError, match="does not exist. Use create_file"):
        call(tool, ctx, path="a.txt", edits=edits(("a", "b")))
    write(root, "same.txt", "a")
    with pytest.raises(ToolError, match="identical"):
        call(tool, ctx, path="same.txt", edits=edits(("a", "a")))


@pytest.mark.parametrize("data, message", [
    (b"\x00\x01binary", "binary file"),
    ("caf\xe9\n".encode("latin-1"), "not valid UTF-8"),
])
def test_edit_file_refuses_binary_and_non_utf8(ctx, root, data, message):
    path = write(root, "f.bin", data)
    with pytest.raises(ToolError, match=message):
        call(EditFileTool(), ctx, path="f.bin", edits=edits(("caf", "x")))
    assert open(path, "rb").read() == data


def test_edit_file_refuses_a_file_over_the_configured_limit(ctx, root):
    path = os.path.join(root, "huge.log")
    with open(path, "wb") as fh:
        fh.truncate(edit.EDIT_CAP + 1)
    with pytest.raises(ToolError, match=r"above the 64 MiB edit limit \(\[tools\] edit_max_mb"):
        call(EditFileTool(), ctx, path="huge.log", edits=edits(("a", "b")))
    ctx.settings.tools.edit_max_mb = 0.5
    with open(path, "wb") as fh:
        fh.write(b"a line\n" * 100_000)
    with pytest.raises(ToolError, match=r"700000 bytes, above the 0.5 MiB edit limit"):
        call(EditFileTool(), ctx, path="huge.log", edits=edits(("a", "b")))


def test_edit_file_refuses_fifo_and_device(ctx, root):
    os.mkfifo(os.path.join(root, "pipe"))
    with pytest.raises(ToolError, match="FIFO"):
        call(EditFileTool(), ctx, path="pipe", edits=edits(("a", "b")))
    ctx.access.allow_edit_file("/dev/null")
    with pytest.raises(ToolError, match="device file"):
        call(CreateFileTool(), ctx, path="/dev/null", content="x", overwrite=True)


def test_edit_file_outside_via_symlink_asks_then_writes_the_real_target(ctx, root, outside):
    target = os.path.join(outside, "target.txt")
    os.symlink(target, os.path.join(root, "link.txt"))
    tool = EditFileTool()
    args = tool.load({"path": "link.txt", "edits": edits(("outside", "edited"))})
    plan = tool.approval(args, ctx)
    request = plan.request
    assert (request.variant, request.path) == (OUTSIDE_EDIT, target)
    assert request.content == [{"type": "diff", "path": target, "old": SECRET,
                                "new": "edited content\n"}]
    tool.run(args, ctx, plan)
    assert content(target) == "edited content\n"
    assert os.path.islink(os.path.join(root, "link.txt"))


def test_edit_file_outside_doomed_edit_fails_before_asking(ctx, outside):
    tool = EditFileTool()
    args = tool.load({"path": os.path.join(outside, "target.txt"), "edits": edits(("nope", "x"))})
    with pytest.raises(ToolError, match="not found"):
        tool.approval(args, ctx)


def test_edit_file_symlink_swapped_between_approval_and_run_writes_nothing(ctx, root, outside):
    write(root, "real/target.txt", "outside content\n")
    link = os.path.join(root, "dir")
    os.symlink(os.path.join(root, "real"), link)
    tool = EditFileTool()
    args = tool.load({"path": "dir/target.txt", "edits": edits(("outside", "pwned"))})
    plan = tool.approval(args, ctx)
    assert plan.request is None
    os.unlink(link)
    os.symlink(outside, link)
    before = snapshot(outside)
    with pytest.raises(ToolError, match="changed after the permission check"):
        tool.run(args, ctx, plan)
    assert snapshot(outside) == before


def test_edit_file_symlink_swapped_after_locations_writes_nothing(ctx, root, outside):
    write(root, "real/target.txt", "outside content\n")
    link = os.path.join(root, "dir")
    os.symlink(os.path.join(root, "real"), link)
    tool = EditFileTool()
    args = tool.load({"path": "dir/target.txt", "edits": edits(("outside", "pwned"))})
    plan = tool.approval(args, ctx)  # one resolution: the location reported and checked
    assert plan.locations == [{"path": os.path.join(root, "real/target.txt")}]
    assert plan.request is None
    os.unlink(link)
    os.symlink(outside, link)
    before = snapshot(outside)
    with pytest.raises(ToolError, match="changed after the permission check"):
        tool.run(args, ctx, plan)
    assert snapshot(outside) == before


def test_edit_file_failed_write_leaves_original_and_no_temp(ctx, root, monkeypatch):
    path = write(root, "a.txt", "one\n")

    def broken_replace(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(edit.os, "replace", broken_replace)
    with pytest.raises(ToolError, match="No space left on device"):
        call(EditFileTool(), ctx, path="a.txt", edits=edits(("one", "two")))
    assert content(path) == "one\n"
    assert os.listdir(root) == ["a.txt"]


def test_create_file_failed_temp_write_leaves_nothing(ctx, root, monkeypatch):
    def broken_fsync(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(edit.os, "fsync", broken_fsync)
    with pytest.raises(ToolError, match="could not write new.txt: Input/output error"):
        call(CreateFileTool(), ctx, path="new.txt", content="x")
    assert os.listdir(root) == []


def test_apply_edits_is_pure():
    text = "a b a"
    assert apply_edits(text, edits(("a", "c"), replace_all=True), "f") == ("c b c", 2)
    assert text == "a b a"


def test_edit_nul_in_path(ctx):
    tool = CreateFileTool()
    with pytest.raises(ToolError, match="NUL"):
        tool.approval(tool.load({"path": "x\x00y", "content": ""}), ctx)


@pytest.mark.parametrize("tool", [CreateFileTool(), EditFileTool()])
def test_edit_tools_spec_describes_every_parameter(tool):
    spec = json.loads(json.dumps(tool.spec()))
    assert tool.kind == "edit" and spec["description"]
    props = spec["parameters"]["properties"]
    assert all(prop.get("description") for prop in props.values())


def counting(monkeypatch, module, name, counts):
    real = getattr(module, name)

    def counted(*args, **kwargs):
        counts[name] = counts.get(name, 0) + 1
        return real(*args, **kwargs)
    monkeypatch.setattr(module, name, counted)


def test_an_approved_edit_resolves_reads_and_diffs_once_then_rechecks_once(ctx, outside,
                                                                        monkeypatch):
    from term2acp.tools import files
    counts = {}
    counting(monkeypatch, paths, "resolve", counts)  # every path resolution
    counting(monkeypatch, files, "open_checked", counts)  # every open of the file to read it
    counting(monkeypatch, edit, "diff_item", counts)
    tool = EditFileTool()
    args = tool.load({"path": os.path.join(outside, "target.txt"),
                      "edits": edits(("outside", "edited"))})
    plan = tool.approval(args, ctx)  # what the turn reports, asks and hands to run()
    assert plan.request.content == [plan.diff]
    assert counts == {"resolve": 1, "open_checked": 1, "diff_item": 1}
    result = tool.run(args, ctx, plan)  # the user allowed it once
    assert result.content == [plan.diff]
    assert counts == {"resolve": 2, "open_checked": 1, "diff_item": 1}  # + the time-of-use check
    assert content(os.path.join(outside, "target.txt")) == "edited content\n"


def test_a_file_changed_between_approval_and_run_is_not_overwritten(ctx, outside):
    target = os.path.join(outside, "target.txt")
    tool = EditFileTool()
    args = tool.load({"path": target, "edits": edits(("outside", "edited"))})
    plan = tool.approval(args, ctx)
    with open(target, "a") as fh:
        fh.write("a line the user added while being asked\n")
    with pytest.raises(ToolError, match="changed after it was read"):
        tool.run(args, ctx, plan)
    assert content(target) == SECRET + "a line the user added while being asked\n"
    assert sorted(os.listdir(outside)) == ["target.txt"]  # no temp file left


def test_an_outside_edit_without_a_plan_is_refused_before_reading(ctx, outside, monkeypatch):
    monkeypatch.setattr(edit, "read_existing", lambda *a: pytest.fail("read without approval"))
    tool = EditFileTool()
    args = tool.load({"path": os.path.join(outside, "target.txt"),
                      "edits": edits(("outside", "edited"))})
    with pytest.raises(ToolError, match="this call was not approved"):
        tool.run(args, ctx)
    assert content(os.path.join(outside, "target.txt")) == SECRET


# ---------------------------------------------------------------- forgiving match
def test_edit_file_shifted_indentation_applies_with_the_files_indentation(ctx, root):
    path = write(root, "a.py", "class A:\n    def f(self):   \n        return 1\n\n    x = 2\n")
    result = call(EditFileTool(), ctx, path="a.py", edits=edits(
        ("def f(self):\n    return 1\n", "def f(self):\n    if True:\n        return 3\n")))
    assert content(path) == ("class A:\n    def f(self):\n        if True:\n            return 3\n"
                             "\n    x = 2\n")
    assert "matched lines 2-3 only after normalising whitespace" in result.text


def test_edit_file_forgiving_match_keeps_crlf(ctx, root):
    path = write(root, "w.txt", "top\r\n  a\r\n  b\r\n")
    call(EditFileTool(), ctx, path="w.txt", edits=edits(("a\nb", "a\nB")))
    assert content(path) == "top\r\n  a\r\n  B\r\n"


def test_edit_file_several_normalised_candidates_fail_and_show_them(ctx, root):
    path = write(root, "b.py", "if a:\n    go()\n    stop()\nif b:\n  go()\n  stop()\n")
    with pytest.raises(ToolError) as err:
        call(EditFileTool(), ctx, path="b.py", edits=edits(("      go()\n      stop()", "x")))
    message = str(err.value)
    assert "2 places in b.py once whitespace is normalised" in message
    assert "lines 2-3:\n        go()" in message and "lines 5-6:\n      go()" in message
    assert "Nothing was changed" in message
    assert content(path).startswith("if a:\n    go()")
