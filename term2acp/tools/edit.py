"""Writing tools: create_file and edit_file.

Edits inside the session root need no approval; a target outside it asks for an
``outside_workspace_edit`` grant, showing the real whole-file diff. ``run()`` computes the
new text in memory first, then writes once: a temp file in the target's directory, renamed
over the target. Right before writing it resolves the path again and opens every directory
on the way with O_NOFOLLOW, checking with the kernel that the directory it holds is the
one that was allowed, so a symlink swapped in after the approval check writes nothing.
"""

import errno
import logging
import os
import secrets
import stat

from marshmallow import Schema, fields, validate

from term2acp.agent.approvals import OUTSIDE_EDIT, ApprovalRequest
from term2acp.tools.base import Tool, ToolError, ToolResult
from term2acp.tools.files import (SNIFF, display_path, drop_planned, is_checked, located,
                                  mark_checked, moved_error, open_regular, planned_path,
                                  resolve_path, same_place)

log = logging.getLogger(__name__)

EDIT_CAP = 4 * 1024 * 1024  # bytes: larger files are not edited in memory
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def read_existing(ctx, real):
    """The current text of an existing target, None when it does not exist; strict UTF-8."""
    if not os.path.lexists(real):
        return None
    shown = display_path(ctx, real)
    fd = open_regular(ctx, real)
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > EDIT_CAP:
            raise ToolError(f"{shown} is {size} bytes, above the {EDIT_CAP // 2**20} MiB edit "
                            "limit. Use the shell to change it.")
        data = fh.read(EDIT_CAP + 1)
    if b"\0" in data[:SNIFF]:
        raise ToolError(f"{shown} is a binary file; only text files can be edited.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(f"{shown} is not valid UTF-8 (byte {exc.start}); editing it as text "
                        "would corrupt it. Use the shell to change it.") from None


def diff_item(real, old, new):
    return {"type": "diff", "path": real, "old": old, "new": new}


def first_changed_line(old, new):
    """1-based number of the first line that differs (1 for a new file)."""
    old_lines, new_lines = (old or "").split("\n"), new.split("\n")
    for number, (before, after) in enumerate(zip(old_lines, new_lines), 1):
        if before != after:
            return number
    return min(len(old_lines), len(new_lines))


def edit_approval(ctx, real, verb, preview):
    """``outside_workspace_edit`` request, with the diff, unless ``real`` is editable.

    ``preview() -> (old, new)`` raises ToolError when the call cannot succeed, so nobody is
    asked to approve an edit that would fail anyway.
    """
    if ctx.access.can_edit(real):
        return None
    old, new = preview()
    mark_checked(ctx, real)
    return ApprovalRequest(variant=OUTSIDE_EDIT, path=real, title=f"{verb} {real}",
                           content=[diff_item(real, old, new)])


def editable_path(ctx, path):
    """Resolve ``path`` at run time and require the target to still be editable."""
    drop_planned(ctx)
    real = resolve_path(ctx, path)
    if not (ctx.access.can_edit(real) or is_checked(ctx, real)):
        raise moved_error(ctx, path, real, "written")
    return real


def write_text(ctx, path, real, text, exclusive):
    """Write ``text`` to ``real`` atomically, resolving and checking once more right before."""
    if editable_path(ctx, path) != real:
        raise moved_error(ctx, path, resolve_path(ctx, path), "written")
    parent, name = os.path.split(real)
    dfd = _open_dirs(ctx, parent)
    try:
        _replace_at(ctx, dfd, name, text.encode("utf-8"), exclusive, real)
    finally:
        os.close(dfd)


def _open_dirs(ctx, parent):
    """An fd on ``parent``, creating missing directories fd-relative, verified by the kernel."""
    base, missing = parent, []
    while not os.path.lexists(base):
        base, tail = os.path.split(base)
        missing.append(tail)
    try:
        fd = os.open(base, _DIR_FLAGS)
    except OSError as exc:
        shown = display_path(ctx, base)
        raise ToolError(f"cannot write into {shown}: {_why(exc, base)}") from None
    try:
        for name in reversed(missing):
            try:
                os.mkdir(name, 0o777, dir_fd=fd)
            except FileExistsError:
                pass
            child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
        if not same_place(fd, parent):
            raise ToolError(f"{display_path(ctx, parent)} changed while being opened (a symlink "
                            "was swapped in?). Nothing was written; call the tool again.")
    except OSError as exc:
        os.close(fd)
        raise ToolError(f"cannot create {display_path(ctx, parent)}: {_why(exc)}") from None
    except ToolError:
        os.close(fd)
        raise
    return fd


def _why(exc, path=None):
    if exc.errno == errno.ELOOP or path and os.path.islink(path):
        return "a symlink was swapped in after the path was checked; nothing was written"
    if exc.errno == errno.ENOTDIR:
        return "a part of the path is a file, not a directory"
    return exc.strerror or str(exc)


def _replace_at(ctx, dfd, name, data, exclusive, real):
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        st = None
    if st is not None and exclusive:
        raise ToolError(f"{display_path(ctx, real)} appeared while writing; nothing was written.")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise ToolError(f"{display_path(ctx, real)} is no longer a regular file (a symlink was "
                        "swapped in?); nothing was written.")
    tmp = f".{name[:200]}.{secrets.token_hex(4)}.tmp"
    try:
        _write_new(dfd, tmp, data, stat.S_IMODE(st.st_mode) if st else None)
    except OSError as exc:
        raise ToolError(f"could not write {display_path(ctx, real)}: {_why(exc)}") from None
    try:
        if exclusive:
            os.link(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        else:
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except FileExistsError:
        raise ToolError(f"{display_path(ctx, real)} appeared while writing; nothing was "
                        "written.") from None
    except OSError as exc:
        raise ToolError(f"could not write {display_path(ctx, real)}: {_why(exc)}") from None
    finally:
        _unlink_quietly(dfd, tmp)


def _write_new(dfd, name, data, mode):
    """Create ``name`` (which must not exist) with ``data``; removed again on any failure."""
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o666, dir_fd=dfd)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        _unlink_quietly(dfd, name)
        raise
    finally:
        os.close(fd)


def _unlink_quietly(dfd, name):
    try:
        os.unlink(name, dir_fd=dfd)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("could not remove temp file %s: %s", name, exc)


class CreateFileParams(Schema):
    path = fields.String(required=True, metadata={
        "description": "File to create, relative to the workspace root or absolute."})
    content = fields.String(required=True, metadata={"description": "The whole file content."})
    overwrite = fields.Boolean(load_default=False, metadata={
        "description": "Replace the file if it already exists. Default: false (refuse)."})


class CreateFileTool(Tool):
    name = "create_file"
    kind = "edit"
    Params = CreateFileParams
    description = (
        "Create a UTF-8 text file with the given content, creating missing parent "
        "directories. Refuses to replace an existing file unless overwrite is true; to "
        "change part of a file use edit_file.")

    def title(self, args):
        verb = "Write" if args.get("overwrite") else "Create"
        return f"{verb} {args.get('path')}"

    def locations(self, args, ctx):
        return located(ctx, args["path"], line=1)

    def approval(self, args, ctx):
        real = planned_path(ctx, args["path"])
        preview = lambda: (self._old(args, ctx, real), args["content"])  # noqa: E731
        return edit_approval(ctx, real, self.title(args).split()[0], preview)

    def run(self, args, ctx):
        new = args["content"]
        if len(new.encode("utf-8")) > EDIT_CAP:
            raise ToolError(f"content is above the {EDIT_CAP // 2**20} MiB limit; write a "
                            "smaller file.")
        real = editable_path(ctx, args["path"])
        old = self._old(args, ctx, real)
        write_text(ctx, args["path"], real, new, exclusive=old is None)
        verb = "Created" if old is None else "Overwrote"
        return ToolResult(f"{verb} {display_path(ctx, real)} ({len(new.splitlines())} lines).",
                          content=[diff_item(real, old, new)],
                          locations=[{"path": real, "line": first_changed_line(old, new)}])

    def _old(self, args, ctx, real):
        shown = display_path(ctx, real)
        if os.path.isdir(real):
            raise ToolError(f"{shown} is a directory; choose a file path.")
        old = read_existing(ctx, real)
        if old is not None and not args["overwrite"]:
            raise ToolError(f"{shown} already exists; nothing was written. Use edit_file to "
                            "change part of it, or call create_file with overwrite=true to "
                            "replace it entirely.")
        return old


class EditParams(Schema):
    old_text = fields.String(required=True, validate=validate.Length(min=1), metadata={
        "description": "Exact text to find, including whitespace and indentation."})
    new_text = fields.String(required=True, metadata={"description": "Replacement text."})
    replace_all = fields.Boolean(load_default=False, metadata={
        "description": "Replace every occurrence instead of requiring exactly one."})


class EditFileParams(Schema):
    path = fields.String(required=True, metadata={
        "description": "File to edit, relative to the workspace root or absolute."})
    edits = fields.List(fields.Nested(EditParams), required=True,
                        validate=validate.Length(min=1),
                        metadata={"description": "Search/replace edits, applied in order."})


class EditFileTool(Tool):
    name = "edit_file"
    kind = "edit"
    Params = EditFileParams
    description = (
        "Edit an existing UTF-8 text file with exact search/replace edits. Each old_text must "
        "match exactly once (copy it from read_file output without the line-number prefix) "
        "unless replace_all is true. Edits apply in order, each to the result of the previous "
        "one; if any edit fails, nothing is written. Use create_file for new files.")

    def title(self, args):
        return f"Edit {args.get('path')}"

    def locations(self, args, ctx):
        return located(ctx, args["path"])

    def approval(self, args, ctx):
        real = planned_path(ctx, args["path"])
        return edit_approval(ctx, real, "Edit", lambda: self._apply(args, ctx, real)[:2])

    def run(self, args, ctx):
        real = editable_path(ctx, args["path"])
        old, new, count = self._apply(args, ctx, real)
        write_text(ctx, args["path"], real, new, exclusive=False)
        line = first_changed_line(old, new)
        edits = len(args["edits"])
        return ToolResult(
            f"Edited {display_path(ctx, real)}: {edits} edit{'s' * (edits != 1)}, {count} "
            f"replacement{'s' * (count != 1)}; first change at line {line}.",
            content=[diff_item(real, old, new)], locations=[{"path": real, "line": line}])

    def _apply(self, args, ctx, real):
        shown = display_path(ctx, real)
        if os.path.isdir(real):
            raise ToolError(f"{shown} is a directory; edit_file edits files.")
        old = read_existing(ctx, real)
        if old is None:
            raise ToolError(f"{shown} does not exist. Use create_file to create it.")
        new, count = apply_edits(old, args["edits"], shown)
        return old, new, count


def apply_edits(text, edits, shown):
    """Apply every edit in memory: (new text, replacements), or ToolError naming the edit."""
    crlf = "\r\n" in text
    total = 0
    for number, edit in enumerate(edits, 1):
        label = f"edit {number}" if len(edits) > 1 else "the edit"
        old, new = edit["old_text"], edit["new_text"]
        if crlf and "\r\n" not in old:  # the model writes LF; the file uses CRLF
            old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
        if old == new:
            raise ToolError(f"{label}: old_text and new_text are identical. Nothing was changed.")
        count = text.count(old)
        if count == 0:
            raise ToolError(_no_match(label, shown, text, old, number > 1))
        if count > 1 and not edit["replace_all"]:
            raise ToolError(
                f"{label}: old_text matches {count} places in {shown} (lines "
                f"{_match_lines(text, old)}). Nothing was changed. Include more surrounding "
                "lines in old_text so it matches exactly once, or set replace_all to true.")
        text = text.replace(old, new) if edit["replace_all"] else text.replace(old, new, 1)
        total += count if edit["replace_all"] else 1
    return text, total


def _match_lines(text, needle, limit=10):
    lines, start = [], text.find(needle)
    while start != -1 and len(lines) < limit:
        lines.append(str(text.count("\n", 0, start) + 1))
        start = text.find(needle, start + len(needle))
    return ", ".join(lines) + (", ..." if start != -1 else "")


def _no_match(label, shown, text, old, after_others):
    message = f"{label}: old_text was not found in {shown}. Nothing was changed."
    if old.strip() and old.strip() in text:
        message += " It matches when leading/trailing whitespace is ignored: copy it exactly."
    elif " ".join(old.split()) in " ".join(text.split()):
        message += " It matches only with different whitespace or indentation: copy it exactly."
    else:
        message += " Re-read the file with read_file and copy the text exactly."
    if after_others:
        message += " Edits apply in order, so match the text as the earlier edits leave it."
    return message
