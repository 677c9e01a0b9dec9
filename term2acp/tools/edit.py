"""Writing tools: create_file and edit_file.

Edits inside the session root need no approval; a target outside it asks for an
``outside_workspace_edit`` grant, showing the real whole-file diff. The approval check
returns an :class:`EditPlan`: the target, resolved once, and, when it asks, the old text
(read once), the new text and the diff (built once) the user is shown. ``run()`` takes
that plan (it reads and builds them itself when nobody was asked), then, right before
writing, resolves the path again (:func:`term2acp.tools.paths.recheck_target`: a target
that moved since the check writes nothing) and writes once with
:func:`term2acp.tools.atomic.write_atomically`: a temp file in the target's directory,
reached without following symlinks and renamed over the target, so a symlink swapped in
after the approval check writes nothing, and only while the file is still the one that was
read (a file changed meanwhile writes nothing: the diff shown would be a lie).
"""

import os
from dataclasses import dataclass

from marshmallow import Schema, fields, validate

from term2acp.core import offhub
from term2acp.tools import editor_io
from term2acp.tools import bigedit, matching, region
from term2acp.tools.atomic import write_atomically
from term2acp.tools.base import Plan, Tool, ToolError, ToolResult, identity
from term2acp.tools.files import SNIFF, open_regular
from term2acp.tools.paths import (can_edit, display_path, edit_request, located, not_approved,
                                  recheck_target, resolve_path)

EDIT_CAP = 64 * 1024 * 1024  # bytes: the default of [tools] edit_max_mb (edit_limit)


def edit_limit(ctx):
    """Bytes: the largest file the editing tools change (``[tools] edit_max_mb``)."""
    if ctx.settings is None:  # a context made without settings (a test's)
        return EDIT_CAP
    return int(ctx.settings.tools.edit_max_mb * 2**20)


def over_limit(shown, size, limit, where=""):
    return ToolError(f"{shown} is {size} bytes{where}, above the {limit / 2**20:g} MiB edit "
                     "limit ([tools] edit_max_mb in the config file); nothing was written. "
                     "Use the shell to change it, or raise the limit.")


@dataclass
class EditPlan(Plan):
    """An edit's plan. ``diff`` is None until the file was read (``prepared``)."""

    old: str | None = None  # the current text; None: the file does not exist
    new: str | None = None  # the text to write
    count: int = 0  # replacements (edit_file)
    notes: list | None = None  # what the result should mention (a forgiving match)
    diff: dict | None = None  # the one diff item: shown with the request and in the result
    seen: tuple | None = None  # base.identity() of the file read (None: it did not exist)
    pieces: list | None = None  # a big file's new bytes, unjoined (``old``, ``new``: None)
    line: int | None = None  # the first changed line, when known

    @property
    def prepared(self):
        return self.diff is not None


def read_existing(ctx, real):
    """``(text, identity)`` of an existing target, ``(None, None)`` when it does not exist;
    strict UTF-8."""
    data, seen = read_bytes(ctx, real)
    if data is None:
        return None, None
    return decoded(data, display_path(ctx, real)), seen


def decoded(data, shown):
    """The text of a file's ``data`` (strict UTF-8; a big file's decoded off the hub)."""
    try:
        return offhub.heavy(len(data), offhub.decode, data)
    except UnicodeDecodeError as exc:
        raise bigedit.not_utf8(shown, exc.start) from None


def read_bytes(ctx, real):
    """``(bytes, identity)`` of an existing target that may be edited (a regular file, not
    binary, within the limit), ``(None, None)`` when it does not exist."""
    if not os.path.lexists(real):
        return None, None
    shown = display_path(ctx, real)
    fd = open_regular(ctx, real)
    limit = edit_limit(ctx)
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if st.st_size > limit:
            raise over_limit(shown, st.st_size, limit)
        source = editor_io.read_via_editor(ctx, real, fh)  # the editor's buffer if it serves
        data = offhub.heavy(st.st_size, source.read, limit + 1)
    if len(data) > limit:  # the editor's unsaved buffer can be larger than the file:
        # editing a cut copy would save it cut, so refuse, never truncate
        raise over_limit(shown, len(data), limit, " in the editor's buffer")
    if b"\0" in data[:SNIFF]:
        raise ToolError(f"{shown} is a binary file; only text files can be edited.")
    return data, identity(st)


def diff_item(real, old, new):
    """The tool call's diff (``region.diff_item``; a big file's off the hub)."""
    size = max(len(old), len(new)) if old is not None and new is not None else 0
    return offhub.heavy(size, region.diff_item, real, old, new)


def first_changed_line(old, new):
    """1-based number of the first line that differs (1 for a new file)."""
    if old is not None and len(old) > region.REGION_OVER:
        return offhub.heavy(len(old), region.first_line, old, new)
    old_lines, new_lines = (old or "").split("\n"), new.split("\n")
    for number, (before, after) in enumerate(zip(old_lines, new_lines), 1):
        if before != after:
            return number
    return min(len(old_lines), len(new_lines))


def write_text(ctx, path, plan):
    """Write the plan's new text to its target atomically, resolving ``path`` once more
    right before (the time-of-use check)."""
    recheck_target(ctx, path, plan)
    real, exclusive = plan.target, plan.seen is None
    if plan.pieces is not None:  # a big file's edit (tools/bigedit.py)
        if editor_io.editor_writes(ctx, real):
            text = offhub.heavy(sum(map(len, plan.pieces)), bigedit.text_of, plan.pieces)
            if editor_io.write_via_editor(ctx, real, text, exclusive, plan.seen):
                return
        write_atomically(ctx, real, plan.pieces, exclusive, plan.seen)
    elif not editor_io.write_via_editor(ctx, real, plan.new, exclusive, plan.seen):
        data = offhub.heavy(len(plan.new), offhub.encode, plan.new)  # (the editor saves it)
        write_atomically(ctx, real, data, exclusive, plan.seen)



class _WriteTool(Tool):
    """What create_file and edit_file share: the plan, the checks and the write."""

    kind = "edit"
    records_writes = True
    line = None  # the line of the reported location, if any

    def verb(self, args):
        raise NotImplementedError

    def locations(self, args, ctx):
        return located(ctx, args["path"], **({"line": self.line} if self.line else {}))

    def approval(self, args, ctx):
        real = resolve_path(ctx, args["path"])
        location = {"path": real, **({"line": self.line} if self.line else {})}
        plan = EditPlan(target=real, locations=[location])
        if not can_edit(ctx, real):
            self.prepare(args, ctx, plan)  # nobody is asked to approve an edit that would fail
            plan.request = edit_request(ctx, real, self.verb(args), plan.diff)
        return plan

    def preview(self, args, ctx, plan):
        if not plan.prepared:
            self.prepare(args, ctx, plan)
        return [plan.diff]

    def run(self, args, ctx, plan=None):
        """Write what ``plan`` (the checked and, if it asked, allowed plan) says; without a
        plan only a target that needs nobody's approval."""
        self.precheck(args)
        if plan is None:
            real = resolve_path(ctx, args["path"])
            if not can_edit(ctx, real):
                raise not_approved(ctx, args["path"], real, "written")
            plan = EditPlan(target=real)
        if not plan.prepared:
            self.prepare(args, ctx, plan)
        write_text(ctx, args["path"], plan)
        return self.result(args, ctx, plan)

    def precheck(self, args):
        """Refuse what needs no file system to refuse."""

    def prepare(self, args, ctx, plan):
        """Read the target once and fill in ``plan``'s old and new text and its diff."""
        raise NotImplementedError

    def result(self, args, ctx, plan):
        raise NotImplementedError


class CreateFileParams(Schema):
    path = fields.String(required=True, metadata={
        "description": "File to create, relative to the workspace root or absolute."})
    content = fields.String(required=True, metadata={"description": "The whole file content."})
    overwrite = fields.Boolean(load_default=False, metadata={
        "description": "Replace the file if it already exists. Default: false (refuse)."})


class CreateFileTool(_WriteTool):
    name = "create_file"
    Params = CreateFileParams
    line = 1
    description = (
        "Create a UTF-8 text file with the given content, creating missing parent "
        "directories. Refuses to replace an existing file unless overwrite is true; to "
        "change part of a file use edit_file.")

    def title(self, args):
        return f"{self.verb(args)} {args.get('path')}"

    def verb(self, args):
        return "Write" if args.get("overwrite") else "Create"

    def precheck(self, args):
        if len(args["content"].encode("utf-8")) > EDIT_CAP:
            raise ToolError(f"content is above the {EDIT_CAP // 2**20} MiB limit; write a "
                            "smaller file.")

    def prepare(self, args, ctx, plan):
        real = plan.target
        shown = display_path(ctx, real)
        if os.path.isdir(real):
            raise ToolError(f"{shown} is a directory; choose a file path.")
        old, seen = read_existing(ctx, real)
        if old is not None and not args["overwrite"]:
            raise ToolError(f"{shown} already exists; nothing was written. Use edit_file to "
                            "change part of it, or call create_file with overwrite=true to "
                            "replace it entirely.")
        plan.old, plan.seen, plan.new = old, seen, args["content"]
        plan.diff = diff_item(real, old, plan.new)

    def result(self, args, ctx, plan):
        real, old, new = plan.target, plan.old, plan.new
        verb = "Created" if old is None else "Overwrote"
        return ToolResult(f"{verb} {display_path(ctx, real)} ({len(new.splitlines())} lines).",
                          content=[plan.diff],
                          locations=[{"path": real, "line": first_changed_line(old, new)}])


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


class EditFileTool(_WriteTool):
    name = "edit_file"
    Params = EditFileParams
    description = (
        "Edit an existing UTF-8 text file with exact search/replace edits. Each old_text must "
        "match exactly once (copy it from read_file output without the line-number prefix) "
        "unless replace_all is true. Edits apply in order, each to the result of the previous "
        "one; if any edit fails, nothing is written. Use create_file for new files.")

    def title(self, args):
        return f"Edit {args.get('path')}"

    def verb(self, args):
        return "Edit"

    def prepare(self, args, ctx, plan):
        real = plan.target
        shown = display_path(ctx, real)
        if os.path.isdir(real):
            raise ToolError(f"{shown} is a directory; edit_file edits files.")
        data, plan.seen = read_bytes(ctx, real)
        if data is None:
            raise ToolError(f"{shown} does not exist. Use create_file to create it.")
        plan.notes = []
        if len(data) > region.REGION_OVER and len(args["edits"]) == 1:
            spliced = offhub.heavy(len(data), bigedit.splice, data, args["edits"][0], shown)
            if spliced is not None:
                plan.pieces, plan.count, plan.line, (old, new, line) = spliced
                plan.diff = {"type": "diff", "path": real, "old": old, "new": new, "line": line}
                return
        old = decoded(data, shown)
        plan.new, plan.count = offhub.heavy(len(old), apply_edits, old, args["edits"], shown,
                                            plan.notes)
        plan.old = old
        plan.diff = diff_item(real, old, plan.new)

    def result(self, args, ctx, plan):
        real, count = plan.target, plan.count
        line = plan.line or first_changed_line(plan.old, plan.new)
        edits = len(args["edits"])
        return ToolResult(
            f"Edited {display_path(ctx, real)}: {edits} edit{'s' * (edits != 1)}, {count} "
            f"replacement{'s' * (count != 1)}; first change at line {line}."
            + "".join(f"\n{note}" for note in plan.notes or ()),
            content=[plan.diff], locations=[{"path": real, "line": line}])


def apply_edits(text, edits, shown, notes=None):
    """Apply every edit in memory: (new text, replacements), or ToolError naming the edit.
    An ``old_text`` found nowhere exactly may match once with whitespace normalised
    (:mod:`term2acp.tools.matching`); ``notes`` then gets a line saying so."""
    crlf = "\r" in text and "\r\n" in text  # one byte is found faster than two
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
            text = _forgiving(label, shown, text, edit, crlf, number > 1, notes)
            total += 1
            continue
        if count > 1 and not edit["replace_all"]:
            raise ToolError(
                f"{label}: old_text matches {count} places in {shown} (lines "
                f"{_match_lines(text, old)}). Nothing was changed. Include more surrounding "
                "lines in old_text so it matches exactly once, or set replace_all to true.")
        text = text.replace(old, new) if edit["replace_all"] else text.replace(old, new, 1)
        total += count if edit["replace_all"] else 1
    return text, total


def _forgiving(label, shown, text, edit, crlf, after_others, notes):
    """``text`` with the one whitespace-normalised match of the edit replaced, keeping the
    file's indentation; ToolError when there is none or more than one."""
    old, new = edit["old_text"], edit["new_text"]
    body = text.replace("\r\n", "\n") if crlf else text
    found = matching.candidates(body, old.replace("\r\n", "\n"))
    if not found:
        raise ToolError(_no_match(label, shown, text, old, after_others))
    if len(found) > 1:
        raise ToolError(
            f"{label}: old_text matches nowhere exactly, and {len(found)} places in {shown} "
            f"once whitespace is normalised:\n{matching.describe(body, found)}\nNothing was "
            "changed. Copy old_text exactly from one of them, with enough lines to be unique.")
    cand = found[0]
    replacement = matching.reindent(old.replace("\r\n", "\n"), new.replace("\r\n", "\n"),
                                    cand.indent)
    body = body[:cand.start] + replacement + body[cand.end:]
    if notes is not None:
        notes.append(f"Note: {label} matched lines {cand.first_line}-{cand.last_line} only "
                     "after normalising whitespace (indentation or trailing spaces); "
                     "new_text was applied with the file's indentation. Check the diff.")
    return body.replace("\n", "\r\n") if crlf else body


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
