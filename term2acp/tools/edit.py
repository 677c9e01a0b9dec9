"""Writing tools: create_file and edit_file.

Edits inside the session root need no approval; a target outside it asks for an
``outside_workspace_edit`` grant, showing the real whole-file diff. ``run()`` computes the
new text in memory first, then, right before writing, resolves the path again
(:func:`term2acp.tools.paths.recheck_editable`) and writes once with
:func:`term2acp.tools.atomic.write_atomically`: a temp file in the target's directory,
reached without following symlinks and renamed over the target, so a symlink swapped in
after the approval check writes nothing.
"""

import os

from marshmallow import Schema, fields, validate

from term2acp.tools.atomic import write_atomically
from term2acp.tools.base import Tool, ToolError, ToolResult
from term2acp.tools.files import SNIFF, open_regular
from term2acp.tools.paths import (display_path, edit_approval, editable_path, located,
                                  planned_path, recheck_editable)

EDIT_CAP = 4 * 1024 * 1024  # bytes: larger files are not edited in memory


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
        data = ctx.read_via_editor(real, fh).read(EDIT_CAP + 1)  # editor's buffer if it serves
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


def write_text(ctx, path, real, text, exclusive):
    """Write ``text`` to ``real`` atomically, resolving and checking once more right before."""
    recheck_editable(ctx, path, real)
    if not ctx.write_via_editor(real, text, exclusive):  # the editor saves it when it can
        write_atomically(ctx, real, text.encode("utf-8"), exclusive)


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
        preview = lambda: diff_item(real, self._old(args, ctx, real), args["content"])  # noqa: E731
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
        return edit_approval(ctx, real, "Edit",
                             lambda: diff_item(real, *self._apply(args, ctx, real)[:2]))

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
