"""read_file and list_directory against a real tmp workspace, hostile inputs included."""

import io
import json
import os
import random

import gevent
import pytest

from term2acp.core.approvals import FOLDER_READ
from term2acp.tools import files
from term2acp.tools.base import ToolError
from term2acp.tools.files import ListDirectoryTool, ReadFileTool

SECRET = "top secret outside the workspace\n"


@pytest.fixture
def outside(tmp_path):
    (tmp_path / "outside").mkdir()
    real = os.path.realpath(tmp_path / "outside")
    with open(os.path.join(real, "secret.txt"), "w") as fh:
        fh.write(SECRET)
    return real


def write(root, rel, data):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb" if isinstance(data, bytes) else "w") as fh:
        fh.write(data)
    return path


def read(ctx, **raw):
    tool = ReadFileTool()
    args = tool.load(raw)
    plan = tool.approval(args, ctx)
    assert plan.request is None
    return tool.run(args, ctx, plan)


def test_read_file_numbers_lines_and_reports_location(ctx, root):
    path = write(root, "src/a.py", "one\ntwo\nthree\n")
    result = read(ctx, path="src/a.py")
    assert result.text == "     1\tone\n     2\ttwo\n     3\tthree"
    assert result.locations == [{"path": path, "line": 1}]
    assert ReadFileTool().locations({"path": "src/a.py"}, ctx) == [{"path": path, "line": 1}]


def test_read_file_line_range(ctx, root):
    write(root, "a.txt", "".join(f"line {i}\n" for i in range(1, 11)))
    result = read(ctx, path="a.txt", start_line=4, end_line=5)
    assert result.text == "     4\tline 4\n     5\tline 5"
    assert result.locations[0]["line"] == 4
    assert read(ctx, path="a.txt", start_line=10).text == "    10\tline 10"


def test_read_file_range_past_end_and_inverted_range(ctx, root):
    write(root, "a.txt", "x\ny\n")
    with pytest.raises(ToolError, match=r"past the end of the file \(2 lines\)"):
        read(ctx, path="a.txt", start_line=5)
    with pytest.raises(ToolError, match="end_line"):
        ReadFileTool().load({"path": "a.txt", "start_line": 5, "end_line": 2})


def test_read_file_numbers_only_newlines(ctx, root):
    write(root, "odd.c", "a\fb\r\nc\u2028d\rz\nlast")
    assert read(ctx, path="odd.c").text == "     1\ta\fb\n     2\tc\u2028d\rz\n     3\tlast"
    assert read(ctx, path="odd.c", start_line=3).text == "     3\tlast"


def test_read_file_empty_file(ctx, root):
    write(root, "empty", "")
    assert read(ctx, path="empty").text == "(empty file)"


def test_read_file_huge_file_is_truncated_with_a_continuation_hint(ctx, root):
    line = "x" * 99 + "\n"
    write(root, "big.txt", line * 5000)  # 500 KB
    result = read(ctx, path="big.txt")
    assert len(result.text.encode()) < files.READ_CAP + 60_000
    last = result.text.splitlines()[-2].split("\t")[0].strip()
    assert f"Call read_file again with start_line={last}" in result.text
    again = read(ctx, path="big.txt", start_line=int(last))
    assert again.text.startswith(f"{int(last):>6}\t")


def test_read_file_single_enormous_line_is_cut(ctx, root):
    write(root, "min.js", "a" * (files.READ_CAP * 2))
    result = read(ctx, path="min.js")
    assert "line 1 is longer than 256 KiB" in result.text
    assert result.text.count("a") <= files.READ_CAP + 5


def _reference_lines(data, start, end, cap):
    """read_file's selection one line at a time, as it was done before (the reference)."""
    lines, lineno, budget, out = data.split(b"\n"), 0, cap, []
    pieces = [piece + b"\n" for piece in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    for piece in pieces:
        lineno += 1
        if lineno < start:
            continue
        if end is not None and lineno > end:
            return b"".join(out), end, None
        if len(piece) > budget:
            out.append(piece[:budget])
            return b"".join(out), lineno, "line" if len(out) == 1 else "file"
        budget -= len(piece)
        out.append(piece)
    return b"".join(out), lineno, None


def test_read_lines_selects_like_reading_line_by_line(monkeypatch):
    """One read and a few scans pick the same bytes, last line and cut as a loop over the
    lines would, at every position of the cap (a tiny cap makes every case show)."""
    rng = random.Random(16)
    for cap in (1, 2, 3, 5, 8, 13, 64):
        monkeypatch.setattr(files, "READ_CAP", cap)
        for _ in range(400):
            data = bytes(rng.choice(b"ab\n\r") for _ in range(rng.randrange(0, 4 * cap + 5)))
            start = rng.randrange(1, 6)
            end = rng.choice([None, start + rng.randrange(0, 6)])
            expected = _reference_lines(data, start, end, cap)
            got = files._read_lines(io.BufferedReader(io.BytesIO(data)), start, end)
            assert got == expected, (cap, data, start, end)


def test_read_file_crlf_and_numbers_past_six_digits(ctx, root):
    write(root, "dos.txt", "one\r\ntwo\r\n\r\nlast\r")
    assert read(ctx, path="dos.txt").text == "     1\tone\n     2\ttwo\n     3\t\n     4\tlast"
    text = files._numbered("a\nb\n", 1_234_567, 1_234_568, None, "")
    assert text == "1234567\ta\n1234568\tb"


def test_read_file_gives_the_hub_a_turn_before_a_big_read(ctx, root):
    """The calls of a model round run back to back in the turn greenlet: a big read first
    lets whatever is ready run (the reader, the protocol writer); it did not before, and
    three 256 KiB reads kept the hub ~20 ms (issue 16). A small one does not yield."""
    write(root, "small.txt", "one\n")
    write(root, "big.txt", "a line\n" * (files.SLICE_BYTES // 7 + 1))
    ran = []
    gevent.spawn(ran.append, "other greenlet")
    read(ctx, path="small.txt")
    assert ran == []
    read(ctx, path="big.txt")
    assert ran == ["other greenlet"]


def test_read_file_numbers_a_big_file_in_bounded_slices(ctx, root):
    """256 KiB of short lines (~130,000) is not numbered in one go: another greenlet that
    waits for the hub to be idle gets a turn at least every NUMBERED_SLICE lines."""
    write(root, "short.txt", "x\n" * (files.READ_CAP // 2))
    turns = []

    def other():
        for _ in range(100_000):  # bounded; killed below
            gevent.idle()
            turns.append(None)

    helper = gevent.spawn(other)
    try:
        result = read(ctx, path="short.txt")
    finally:
        helper.kill()
    assert result.text.endswith(f"{files.READ_CAP // 2:>6}\tx")
    assert len(turns) >= files.READ_CAP // 2 // files.NUMBERED_SLICE - 1


def test_read_file_refuses_binary(ctx, root):
    write(root, "img.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(ToolError, match="img.png is a binary file"):
        read(ctx, path="img.png")


def test_read_file_non_utf8_is_replaced_and_said(ctx, root):
    write(root, "latin1.txt", "caf\xe9\n".encode("latin-1"))
    result = read(ctx, path="latin1.txt")
    assert "caf\ufffd" in result.text
    assert "not valid UTF-8" in result.text


def test_read_file_missing_file(ctx):
    with pytest.raises(ToolError, match="nope.txt does not exist"):
        read(ctx, path="nope.txt")


def test_read_file_directory_hints_list_directory(ctx, root):
    os.mkdir(os.path.join(root, "pkg"))
    with pytest.raises(ToolError, match="use list_directory"):
        read(ctx, path="pkg")


def test_read_file_fifo_is_refused_without_blocking(ctx, root):
    os.mkfifo(os.path.join(root, "pipe"))
    with pytest.raises(ToolError, match="FIFO"):
        read(ctx, path="pipe")


def test_read_file_device_needs_approval_then_is_refused(ctx):
    tool = ReadFileTool()
    args = tool.load({"path": "/dev/zero"})
    plan = tool.approval(args, ctx)
    assert (plan.request.variant, plan.request.path) == (FOLDER_READ, "/dev")
    with pytest.raises(ToolError, match="device file"):
        tool.run(args, ctx, plan)  # as if the user allowed it once


def test_read_file_symlink_to_device_resolves_outside(ctx, root):
    os.symlink("/dev/zero", os.path.join(root, "zero"))
    tool = ReadFileTool()
    args = tool.load({"path": "zero"})
    assert tool.approval(args, ctx).request.path == "/dev"
    ctx.access.allow_read_folder("/dev")
    plan = tool.approval(args, ctx)
    assert plan.request is None
    with pytest.raises(ToolError, match="device file"):
        tool.run(args, ctx, plan)


@pytest.mark.parametrize("how", ["traversal", "absolute", "symlink"])
def test_read_file_outside_asks_for_the_containing_folder(ctx, root, outside, how):
    os.symlink(os.path.join(outside, "secret.txt"), os.path.join(root, "link.txt"))
    path = {"traversal": "../outside/secret.txt", "absolute": os.path.join(outside, "secret.txt"),
            "symlink": "link.txt"}[how]
    tool = ReadFileTool()
    args = tool.load({"path": path})
    plan = tool.approval(args, ctx)
    assert (plan.request.variant, plan.request.path) == (FOLDER_READ, outside)
    assert "secret" in tool.run(args, ctx, plan).text  # the approval check saw it: allowed once


def test_read_file_outside_without_approval_check_is_refused(ctx, outside):
    tool = ReadFileTool()
    with pytest.raises(ToolError, match="outside the workspace") as info:
        tool.run(tool.load({"path": os.path.join(outside, "secret.txt")}), ctx)
    assert "top secret" not in str(info.value)


def test_read_file_outside_with_session_grant_needs_no_approval(ctx, outside):
    ctx.access.allow_read_folder(outside)
    result = read(ctx, path=os.path.join(outside, "secret.txt"))
    assert result.text == "     1\ttop secret outside the workspace"


def test_read_file_symlink_swapped_after_approval_is_refused(ctx, root, outside):
    write(root, "inner/secret.txt", "inside\n")
    link = os.path.join(root, "dir")
    os.symlink(os.path.join(root, "inner"), link)
    tool = ReadFileTool()
    args = tool.load({"path": "dir/secret.txt"})
    plan = tool.approval(args, ctx)
    assert plan.request is None
    os.unlink(link)
    os.symlink(outside, link)
    with pytest.raises(ToolError, match="changed after the permission check") as info:
        tool.run(args, ctx, plan)
    assert "top secret" not in str(info.value)


def test_read_file_checks_before_run_share_one_resolution_but_run_resolves_again(
        ctx, root, outside):
    write(root, "inner/secret.txt", "inside\n")
    link = os.path.join(root, "dir")
    os.symlink(os.path.join(root, "inner"), link)
    tool = ReadFileTool()
    args = tool.load({"path": "dir/secret.txt"})
    plan = tool.approval(args, ctx)  # the location reported and the target checked: one
    assert plan.locations == [{"path": os.path.join(root, "inner/secret.txt"), "line": 1}]
    assert plan.request is None
    os.unlink(link)
    os.symlink(outside, link)
    with pytest.raises(ToolError, match="changed after the permission check") as info:
        tool.run(args, ctx, plan)
    assert "top secret" not in str(info.value)
    request = tool.approval(args, ctx).request  # the next call's check sees the new target
    assert (request.variant, request.path) == (FOLDER_READ, outside)


def test_read_file_nul_in_path(ctx):
    tool = ReadFileTool()
    args = tool.load({"path": "a\x00b"})
    with pytest.raises(ToolError, match="NUL"):
        tool.approval(args, ctx)
    with pytest.raises(ToolError, match="NUL"):
        tool.run(args, ctx)
    assert tool.locations(args, ctx) == []


def test_open_regular_refuses_a_symlink_swapped_in_after_resolution(ctx, root, outside):
    link = os.path.join(root, "late.txt")
    os.symlink(os.path.join(outside, "secret.txt"), link)
    with pytest.raises(ToolError, match="not a regular file|symlink"):
        files.open_regular(ctx, link)  # a stale "resolved" path that is now a symlink


def list_dir(ctx, **raw):
    tool = ListDirectoryTool()
    args = tool.load(raw)
    plan = tool.approval(args, ctx)
    assert plan.request is None
    return tool.run(args, ctx, plan).text


def test_list_directory_marks_types_and_puts_directories_first(ctx, root):
    write(root, "b.txt", "12345")
    os.mkdir(os.path.join(root, "zdir"))
    os.symlink("b.txt", os.path.join(root, "a-link"))
    os.mkfifo(os.path.join(root, "fifo"))
    assert list_dir(ctx).splitlines() == ["zdir/", "a-link@ -> b.txt", "b.txt  (5 bytes)", "fifo|"]


def test_list_directory_caps_entries(ctx, root):
    for i in range(files.MAX_ENTRIES + 7):
        write(root, f"many/f{i:04}", "")
    text = list_dir(ctx, path="many")
    assert len(text.splitlines()) == files.MAX_ENTRIES + 1
    assert "7 more entries not shown" in text


def test_list_directory_refuses_files_and_missing(ctx, root):
    write(root, "f.txt", "x")
    with pytest.raises(ToolError, match="use read_file"):
        list_dir(ctx, path="f.txt")
    with pytest.raises(ToolError, match="does not exist"):
        list_dir(ctx, path="missing")


def test_list_directory_outside_asks_for_that_directory(ctx, outside):
    tool = ListDirectoryTool()
    request = tool.approval(tool.load({"path": "../outside"}), ctx).request
    assert (request.variant, request.path) == (FOLDER_READ, outside)
    assert tool.approval(tool.load({}), ctx).request is None


@pytest.mark.parametrize("tool", [ReadFileTool(), ListDirectoryTool()])
def test_read_tools_spec_describes_every_parameter(tool):
    spec = json.loads(json.dumps(tool.spec()))
    assert spec["description"] and tool.kind == "read"
    assert all(prop.get("description") for prop in spec["parameters"]["properties"].values())
