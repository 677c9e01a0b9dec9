"""Reading tools (read_file, list_directory) and the regular-file open the edit tools share.

Which targets may be read, the plan the approval check returns (:func:`paths.read_plan`)
and the re-check ``run()`` does with it, is the path policy in :mod:`term2acp.tools.paths`. The file is checked once more as it is opened:
:func:`open_regular` accepts regular files only, opens with O_NOFOLLOW (a symlink swapped
in is not followed) and O_NONBLOCK (a FIFO swapped in cannot block), and asks the kernel
whether the fd it holds is the file that was checked (:func:`paths.open_checked`).
list_directory lists the fd it opened the same way (O_DIRECTORY|O_NOFOLLOW, one kernel
check), never a path that could be swapped for a symlink between the check and the read.
"""

import errno
import os
import stat

import gevent
from marshmallow import Schema, ValidationError, fields, validate, validates_schema

from term2acp.tools import editor_io, images
from term2acp.tools.base import Tool, ToolError, ToolResult
from term2acp.tools.paths import (DIR_FLAGS, FILE_FLAGS, PathMoved, display_path, located,
                                  open_checked, read_plan, readable_path)

READ_CAP = 256 * 1024  # bytes of file text one read_file call returns
SNIFF = 8192  # bytes inspected for NUL to call a file binary
MAX_ENTRIES = 500  # list_directory entries shown
MAX_LISTED = 100_000  # list_directory reads at most this many entries
SLICE_BYTES = 64 * 1024  # a bigger read_file yields to the hub before reading and numbering
NUMBERED_SLICE = 1024  # lines numbered between two yields to the hub


def _kind_of(mode):
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device file"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symlink that changed after it was resolved"
    return "not a regular file"


def open_regular(ctx, real):
    """Open ``real`` for reading without ever blocking: regular files only; returns an fd."""
    try:
        st = os.lstat(real)
    except FileNotFoundError:
        raise ToolError(f"{display_path(ctx, real)} does not exist. Check the path with "
                        "list_directory or glob.") from None
    except OSError as exc:
        raise ToolError(f"cannot read {display_path(ctx, real)}: {exc.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{display_path(ctx, real)} is a directory; use list_directory to see "
                        "its entries.")
    if not stat.S_ISREG(st.st_mode):
        raise ToolError(f"{display_path(ctx, real)} is {_kind_of(st.st_mode)}; only regular "
                        "files can be read.")
    try:
        fd = open_checked(real, FILE_FLAGS)
    except PathMoved:
        raise _changed(ctx, real) from None
    except OSError as exc:
        reason = "it was replaced by a symlink" if exc.errno == errno.ELOOP else exc.strerror
        raise ToolError(f"cannot read {display_path(ctx, real)}: {reason}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _changed(ctx, real)
    return fd


def _changed(ctx, real):
    return ToolError(f"{display_path(ctx, real)} changed while being opened (something was "
                     "swapped in); nothing was read. Try again.")


def decode(data):
    """(text, note): strict UTF-8, else replacement characters and a note saying so."""
    try:
        return data.decode("utf-8"), ""
    except UnicodeDecodeError:
        return (data.decode("utf-8", errors="replace"),
                "[note: the file is not valid UTF-8; undecodable bytes are shown as U+FFFD]")


class ReadFileParams(Schema):
    path = fields.String(required=True, metadata={
        "description": "File to read, relative to the workspace root or absolute."})
    start_line = fields.Integer(load_default=None, validate=validate.Range(min=1), metadata={
        "description": "First line to return (1-based). Default: 1."})
    end_line = fields.Integer(load_default=None, validate=validate.Range(min=1), metadata={
        "description": "Last line to return (1-based, inclusive). Default: end of file."})

    @validates_schema
    def _range(self, data, **kwargs):
        start, end = data.get("start_line"), data.get("end_line")
        if start and end and end < start:
            raise ValidationError("end_line must not be smaller than start_line", "end_line")


class ReadFileTool(Tool):
    name = "read_file"
    kind = "read"
    Params = ReadFileParams
    description = (
        "Read a UTF-8 text file. Each returned line is prefixed with its line number and a "
        "tab; the prefix is not part of the file. Returns at most 256 KiB per call: use "
        "start_line/end_line to read further or only a part. Binary files and device files "
        "are refused; use list_directory for directories.")

    def title(self, args):
        start, end = args.get("start_line"), args.get("end_line")
        if start or end:
            return f"Read {args.get('path')} (lines {start or 1}-{end or 'end'})"
        return f"Read {args.get('path')}"

    def locations(self, args, ctx):
        return located(ctx, args["path"], line=args.get("start_line") or 1)

    def approval(self, args, ctx):
        return read_plan(ctx, args["path"], self.title(args), line=args.get("start_line") or 1)

    def run(self, args, ctx, plan=None):
        real = readable_path(ctx, args["path"], plan)
        fd = open_regular(ctx, real)
        with os.fdopen(fd, "rb") as fh:
            if os.fstat(fd).st_size > SLICE_BYTES:
                # The calls of a model round run back to back in the turn greenlet: big
                # reads without a yield would keep the hub from reading stdin. A big read
                # first lets whatever is ready run (stdin, the protocol writer woken by
                # the store thread), not only what a timer lets in before this greenlet.
                gevent.idle()
            if images.wanted(ctx, fh.peek(SNIFF)[:16]):  # an image, for a model that sees
                return images.image_result(display_path(ctx, real), fh)
            if b"\0" in fh.peek(SNIFF)[:SNIFF]:
                raise ToolError(f"{display_path(ctx, real)} is a binary file; read_file only "
                                "shows text. Use the shell (e.g. xxd or file) to inspect it.")
            start = args.get("start_line") or 1
            source = editor_io.read_via_editor(ctx, real, fh)  # the editor's buffer when it serves reads
            block, last, cut = _read_lines(source, start, args.get("end_line"))
        if not block and start > 1:
            raise ToolError(f"start_line {start} is past the end of the file "
                            f"({last} lines). Use a smaller start_line.")
        if len(block) > SLICE_BYTES:
            gevent.idle()  # reading and numbering are two slices
        text, note = decode(block)
        return ToolResult(_numbered(text, start, last, cut, note) or "(empty file)",
                          locations=[{"path": real, "line": start}])


def _skip_lines(fh, count):
    """Skip ``count`` lines without holding a long line in memory; returns lines skipped."""
    done, partial = 0, False
    while done < count:
        chunk = fh.readline(SNIFF * 8)
        if not chunk:
            return done + partial
        partial = not chunk.endswith(b"\n")
        done += not partial
        if done % 4096 == 0:
            gevent.idle()  # let I/O (cancel) in: sleep(0) runs ready greenlets only
    return done


def _read_lines(fh, start, end):
    """Lines ``start``..``end`` within READ_CAP bytes: (their bytes, last line number, cut).

    One read of READ_CAP + 1 bytes and a few scans of it (no Python loop per line):
    ``cut`` is "line" when the only line returned was cut at the cap, "file" when the
    last of several was, else None."""
    lineno = _skip_lines(fh, start - 1)
    if lineno < start - 1:
        return b"", lineno, None
    data = fh.read(READ_CAP + 1)  # fewer bytes only at the end of the file
    wanted = None if end is None else end - lineno
    if wanted is not None and data.count(b"\n") >= wanted:
        cut_at = len(data) - len(data.split(b"\n", wanted)[-1])  # after the wanted lines
        count = wanted
    else:
        cut_at = data.rfind(b"\n") + 1  # after the last whole line
        count = data.count(b"\n")
        if cut_at < len(data):  # a last line without its newline (the end, or the cap)
            cut_at = len(data)
            count += 1
    if cut_at > READ_CAP:  # the last line does not fit: cut at the cap
        return data[:READ_CAP], lineno + count, "line" if count == 1 else "file"
    return data[:cut_at], lineno + count, None


def _numbered(text, start, last, cut, note):
    lines = text.split("\n")  # not splitlines(): \f, \v or a lone \r must not shift numbers
    if lines[-1] == "":
        lines.pop()
    crlf = "\r" in text
    parts = []
    for first in range(0, len(lines), NUMBERED_SLICE):
        if first:
            gevent.idle()  # the store thread and the hub take turns here too
        chunk = lines[first:first + NUMBERED_SLICE]
        if crlf:
            chunk = [line.removesuffix("\r") for line in chunk]
        parts.append("\n".join(map("%6d\t%s".__mod__, zip(
            range(start + first, start + first + len(chunk)), chunk))))
    body = "\n".join(parts)
    tail = []
    if cut == "line":
        tail.append(f"[line {last} is longer than {READ_CAP // 1024} KiB and was cut. Use the "
                    "shell (e.g. cut -c or head -c) to see the rest of it.]")
    elif cut:
        tail.append(f"[truncated at line {last}: the {READ_CAP // 1024} KiB limit per call was "
                    f"reached. Call read_file again with start_line={last} to continue.]")
    if note:
        tail.append(note)
    return "\n".join([body, *tail]) if tail else body


_MARKERS = ((stat.S_ISDIR, "/"), (stat.S_ISLNK, "@"), (stat.S_ISFIFO, "|"), (stat.S_ISSOCK, "="))


class ListDirectoryParams(Schema):
    path = fields.String(load_default=".", metadata={
        "description": "Directory to list, relative to the workspace root or absolute. "
                       "Default: the root."})


class ListDirectoryTool(Tool):
    name = "list_directory"
    kind = "read"
    Params = ListDirectoryParams
    description = (
        "List a directory's entries, directories first. Markers: name/ directory, name@ "
        "symlink (with its target), name| FIFO, name= socket; files show their size in bytes. "
        f"Shows at most {MAX_ENTRIES} entries; use glob to search a tree.")

    def title(self, args):
        return f"List {args.get('path') or '.'}"

    def locations(self, args, ctx):
        return located(ctx, args.get("path") or ".")

    def approval(self, args, ctx):
        return read_plan(ctx, args.get("path") or ".", self.title(args))

    def run(self, args, ctx, plan=None):
        real = readable_path(ctx, args.get("path") or ".", plan)
        shown = display_path(ctx, real)
        if os.path.isfile(real):
            raise ToolError(f"{shown} is a file; use read_file to read it.")
        try:
            fd = open_checked(real, DIR_FLAGS)  # the listed directory is the checked one
        except FileNotFoundError:
            raise ToolError(f"{shown} does not exist.") from None
        except (PathMoved, NotADirectoryError):
            raise ToolError(f"{shown} changed while being opened (something was swapped in); "
                            "nothing was listed. Try again.") from None
        except OSError as exc:
            reason = "it was replaced by a symlink" if exc.errno == errno.ELOOP else exc.strerror
            raise ToolError(f"cannot list {shown}: {reason}") from None
        try:
            entries = _list(fd)
        except OSError as exc:
            raise ToolError(f"cannot list {shown}: {exc.strerror}") from None
        finally:
            os.close(fd)
        entries.sort(key=lambda item: (not item[1], item[0]))
        lines = [line for line, _ in entries[:MAX_ENTRIES]]
        if len(entries) > MAX_ENTRIES:
            lines.append(f"[{len(entries) - MAX_ENTRIES} more entries not shown; use glob "
                         "with a pattern to narrow the listing.]")
        return ToolResult("\n".join(lines) or f"{shown} is empty.", locations=[{"path": real}])


def _list(fd):
    """``[(line, is_dir)]`` for the entries of the open directory ``fd`` (names relative)."""
    entries = []
    with os.scandir(fd) as it:
        for number, entry in enumerate(it, 1):
            entries.append((_entry_line(entry, fd), entry.is_dir(follow_symlinks=False)))
            if number % 1024 == 0:
                gevent.idle()  # a huge directory must not starve the hub (or its I/O)
            if number >= MAX_LISTED:
                break
    return entries


def _entry_line(entry, dir_fd):
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return entry.name
    for test, marker in _MARKERS:
        if test(st.st_mode):
            if marker == "@":
                return f"{entry.name}@ -> {_link_target(entry.name, dir_fd)}"
            return entry.name + marker
    if stat.S_ISREG(st.st_mode):
        return f"{entry.name}  ({st.st_size} bytes)"
    return entry.name


def _link_target(name, dir_fd):
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except OSError:
        return "?"
