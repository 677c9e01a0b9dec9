"""Big files off the hub: core/offhub.py (steps, the thread) and tools/bigedit.py (one exact
edit spliced into the bytes). The spliced edit must be exactly what the text path makes:
same bytes written, same diff region, same first line."""

import os

import gevent
import pytest
from gevent.socket import wait_read

from term2acp.core import offhub
from term2acp.tools import bigedit, region
from term2acp.tools.apply_patch import ApplyPatchTool
from term2acp.tools.base import ToolError
from term2acp.tools.edit import EditFileTool, apply_edits

LINE = "line {n}: naïve café — worker {n}\n"  # non-ASCII, so steps cut inside characters


def big_text(lines=60_000, newline="\n"):
    text = "".join(LINE.format(n=n) for n in range(lines)).replace("\n", newline)
    assert len(text.encode()) > 2 * offhub.STEP
    return text


def test_decode_and_encode_in_steps_equal_the_whole():
    text = "a" * (offhub.STEP - 1) + "é€" + big_text()  # é's bytes on both sides of a step
    data = text.encode()
    assert data[offhub.STEP - 1:offhub.STEP + 1] == "é".encode()
    assert offhub.decode(data) == text
    assert offhub.encode(text) == data
    assert offhub.newlines(data, 5, len(data) - 5) == data.count(b"\n", 5, len(data) - 5)


def test_a_bad_byte_is_reported_where_it_is_in_the_whole():
    data = bytearray(big_text().encode())
    data[offhub.STEP + 3] = 0xFF
    with pytest.raises(UnicodeDecodeError) as raised:
        offhub.decode(bytes(data))
    assert raised.value.start == offhub.STEP + 3
    assert bigedit.utf8_error(bytes(data)) == offhub.STEP + 3
    assert bigedit.utf8_error(big_text().encode()) is None


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
@pytest.mark.parametrize("replace_all", [False, True])
def test_a_spliced_edit_is_the_text_edit(newline, replace_all):
    text = big_text(newline=newline)
    old = "worker 30000\nline 30001: naïve" if not replace_all else "café — worker 4000"
    edit = {"old_text": old, "new_text": "changé\nhere", "replace_all": replace_all}
    expected, count = apply_edits(text, [edit], "f")
    pieces, spliced_count, first_line, (before, after, line) = bigedit.splice(
        text.encode(), edit, "f")
    assert b"".join(pieces) == expected.encode() and spliced_count == count
    assert first_line == region.first_line(text, expected)
    shown = region.diff_item("/f", text, expected)
    assert (before, after, line) == (shown["old"], shown["new"], shown["line"])


@pytest.mark.parametrize("old,new", [
    ("worker 30000\n", "worker 30000 (appended)\n"),  # one block the start of the other
    ("naïve café — worker 30000", "café — worker 30000"),  # the end of the other
    ("line 30000: naïve café — worker 30000\n", ""),  # a deletion
    ("— worker 30000\nline 30001", "— worker 30000\nline 30001"[::-1]),
])
def test_a_spliced_edit_shows_the_region_the_text_shows(old, new):
    text = big_text()
    edit = {"old_text": old, "new_text": new, "replace_all": False}
    expected, _ = apply_edits(text, [edit], "f")
    spliced = bigedit.splice(text.encode(), edit, "f")
    assert spliced is not None
    pieces, _, first_line, (before, after, line) = spliced
    assert b"".join(pieces) == expected.encode()
    assert first_line == region.first_line(text, expected)
    shown = region.diff_item("/f", text, expected)
    assert (before, after, line) == (shown["old"], shown["new"], shown["line"])


def test_a_patchs_hunks_spliced_are_the_text_splice():
    from term2acp.tools.patch import parse

    text = big_text()
    lines = text.split("\n")
    patch = ("*** Begin Patch\n*** Update File: f\n"
             f" {lines[999]}\n-{lines[1000]}\n+{lines[1000]} (one)\n {lines[1001]}\n"
             f"@@ {lines[40000]}\n {lines[40001]}\n-{lines[40002]}\n {lines[40003]}\n"
             "*** End Patch")
    [op] = parse(patch)
    expected = region.splice_hunks(text, op.hunks)
    pieces, count, first_line, (before, after, line) = bigedit.splice_hunks(text.encode(),
                                                                           op.hunks, "f")
    assert b"".join(pieces) == expected.encode() and count == 2
    assert first_line == region.first_line(text, expected) == 1001
    shown = region.diff_item("/f", text, expected)
    assert (before, after, line) == (shown["old"], shown["new"], shown["line"])


def test_what_a_splice_does_not_do_is_left_to_the_text():
    data = big_text().encode()
    assert bigedit.splice(data, {"old_text": "not in it", "new_text": "x",
                                 "replace_all": False}, "f") is None  # the forgiving match
    assert bigedit.splice(data, {"old_text": "naïve café", "new_text": "x",
                                 "replace_all": False}, "f") is None  # the error names lines
    with pytest.raises(ToolError, match="identical"):
        bigedit.splice(data, {"old_text": "a", "new_text": "a", "replace_all": False}, "f")
    bad = data[:offhub.STEP + 3] + b"\xff" + data[offhub.STEP + 4:]
    with pytest.raises(ToolError, match=rf"f is not valid UTF-8 \(byte {offhub.STEP + 3}\)"):
        bigedit.splice(bad, {"old_text": "worker 1\n", "new_text": "x", "replace_all": False},
                       "f")


EDIT = {"path": "big.log", "edits": [
    {"old_text": "worker 150000\n", "new_text": "worker 150000 (edited)\n"}]}
PATCH = {"input": "*** Begin Patch\n*** Update File: big.log\n line 150000: naïve café — "
                  "worker 150000\n-line 150001: naïve café — worker 150001\n+line 150001: "
                  "edited\n*** End Patch"}


@pytest.mark.parametrize("tool,arguments,written", [
    (EditFileTool, EDIT, "worker 150000 (edited)\n"),
    (ApplyPatchTool, PATCH, "\nline 150001: edited\n")])
def test_the_hub_answers_while_a_big_file_is_edited(ctx, root, tool, arguments, written):
    """Reading, checking, splicing and writing a big file happen in gevent's pool: a
    greenlet waiting for input runs before the edit is done (on the hub it ran after)."""
    path = os.path.join(root, "big.log")
    with open(path, "w") as fh:
        fh.write(big_text(lines=200_000))
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"x")
    order = []

    def reader():
        wait_read(read_fd)
        order.append("reader")

    def editing():
        args = tool().load(arguments)
        tool().run(args, ctx, tool().approval(args, ctx))
        order.append("edit")

    try:
        waiting = gevent.spawn(reader)
        gevent.sleep(0)
        gevent.joinall([gevent.spawn(editing), waiting], timeout=60, raise_error=True)
    finally:
        os.close(read_fd)
        os.close(write_fd)
    assert order == ["reader", "edit"]
    with open(path, encoding="utf-8") as fh:
        assert written in fh.read()


def test_a_big_file_patched_and_moved_shows_where_it_came_from(ctx, root):
    text = big_text()
    with open(os.path.join(root, "big.log"), "w") as fh:
        fh.write(text)
    tool = ApplyPatchTool()
    args = tool.load({"input": "*** Begin Patch\n*** Update File: big.log\n*** Move to: "
                               "moved.log\n-line 30001: naïve café — worker 30001\n+moved\n"
                               "*** End Patch"})
    result = tool.run(args, ctx, tool.approval(args, ctx))
    [diff] = [item for item in result.content if item["type"] == "diff"]
    assert diff["path"] == os.path.join(root, "moved.log")
    assert diff["old_path"] == os.path.join(root, "big.log")
    assert "+moved" not in diff["old"] and "moved" in diff["new"]
    assert sorted(os.listdir(root)) == ["moved.log"]
    with open(os.path.join(root, "moved.log"), encoding="utf-8") as fh:
        assert fh.read() == text.replace("line 30001: naïve café — worker 30001\n", "moved\n")


def test_a_cancelled_big_edit_leaves_the_file_whole_and_no_temp_file(ctx, root):
    """Killed while its thread works, the edit waits for the thread (which may be using a
    descriptor the unwinding closes), then writes nothing or everything."""
    path = os.path.join(root, "big.log")
    text = big_text(lines=200_000)
    with open(path, "w") as fh:
        fh.write(text)
    tool = EditFileTool()
    args = tool.load({"path": "big.log", "edits": [
        {"old_text": "worker 150000\n", "new_text": "worker 150000 (edited)\n"}]})
    for delay in (0.0, 0.005, 0.02, 0.05):
        job = gevent.spawn(tool.run, args, ctx, tool.approval(args, ctx))
        gevent.sleep(delay)
        job.kill(block=True, timeout=30)
        assert job.dead
        assert sorted(os.listdir(root)) == ["big.log"]
        with open(path, encoding="utf-8") as fh:
            now = fh.read()
        assert now in (text, apply_edits(text, args["edits"], "f")[0])
        if now != text:
            with open(path, "w") as fh:
                fh.write(text)
