"""apply_patch: add, update, delete and move files with one patch in the Codex format.

The format and how hunks are located are :mod:`term2acp.tools.patch`. The approval check
parses the patch, resolves every path once, reads every file it changes once and applies
every hunk in memory, so a patch that does not apply fails before anyone is asked and
before anything is written. Paths follow the edit tools' policy
(:mod:`term2acp.tools.paths`): inside the root nothing asks; each target outside asks for
an ``outside_workspace_edit`` grant (the first through the call's own request, the others
from ``run`` before anything is written), showing the patch's diffs; credential files
always ask.

``run`` resolves every path again (a target that moved since the check writes nothing),
then writes all or nothing: local changes are staged and committed together
(:mod:`term2acp.tools.changeset`); where the editor serves writes (ACP ``fs``), files
inside the root are written through it, and restored through it if a later write fails.
"""

import os
from dataclasses import dataclass, field

from marshmallow import Schema, fields, validate

from term2acp.core import offhub
from term2acp.core.approvals import OUTSIDE_EDIT, ApprovalRequest
from term2acp.core.sensitive import is_sensitive
from term2acp.tools import bigedit, editor_io
from term2acp.tools.atomic import open_dirs
from term2acp.tools.base import EditorError, Plan, Tool, ToolError, ToolResult, identity
from term2acp.tools.changeset import ChangeSet
from term2acp.tools.edit import (decoded, diff_item, edit_limit, first_changed_line,
                                 over_limit, read_bytes)
from term2acp.tools.region import REGION_OVER, splice_hunks
from term2acp.tools.files import open_regular
from term2acp.tools.patch import PatchError, apply_hunks, parse
from term2acp.tools.paths import (SENSITIVE_NOTE, can_edit, display_path, not_approved,
                                  resolve_path)

FORMAT = """\
*** Begin Patch
*** Add File: path/new.py
+every line of the new file, each after a +
*** Update File: path/old.py
*** Move to: path/renamed.py      (optional: move the file too)
@@ def some_function():           (optional: a line of the file above the change)
 unchanged context line
-removed line
+added line
 unchanged context line
*** Delete File: path/obsolete.py
*** End Patch"""


class ApplyPatchParams(Schema):
    input = fields.String(required=True, validate=validate.Length(min=1), metadata={
        "description": "The whole patch, from '*** Begin Patch' to '*** End Patch'."})


@dataclass
class FileChange:
    """What the patch does to one file, computed by the approval check."""

    action: str  # add, update, delete
    real: str  # the file (the source of a move)
    old: str | None = None  # its text now (None: it does not exist)
    new: str | None = None  # its text after (None: deleted or moved away)
    seen: tuple | None = None  # base.identity() of the file read
    dest: str | None = None  # a move's destination
    hunks: int = 0
    loose: list = field(default_factory=list)  # hunks located ignoring whitespace
    shown: dict | None = None  # the diff, built once
    data: bytes | None = None  # a big file's bytes, when its hunks were spliced in them:
    pieces: list | None = None  # its new bytes, unjoined (``old``, ``new``: None then)
    region: tuple | None = None  # (old, new, line) of its diff
    line: int | None = None  # the first changed line, when known

    @property
    def targets(self):
        verb = {"add": "Create", "delete": "Delete"}.get(self.action, "Edit")
        if self.dest is None:
            return [(self.real, verb)]
        return [(self.real, "Move"), (self.dest, "Move")]

    @property
    def changes(self):
        """Whether it writes the file (an add or an update, spliced or not)."""
        return self.new is not None or self.pieces is not None

    def texts(self):
        """``(old, new)`` text (a spliced big file's made now: the editor writes it)."""
        if self.pieces is None:
            return self.old, self.new
        return (offhub.heavy(len(self.data), offhub.decode, self.data),
                offhub.heavy(len(self.data), bigedit.text_of, self.pieces))

    def diff(self):
        if self.shown is None:
            if self.region is not None:  # a spliced big file: the changed region
                old, new, line = self.region
                self.shown = {"type": "diff", "path": self.dest or self.real, "old": old,
                              "new": new, "line": line}
            else:
                self.shown = diff_item(self.dest or self.real, self.old, self.new)
            if self.dest is not None:
                self.shown["old_path"] = self.real
        return self.shown


@dataclass
class PatchPlan(Plan):
    changes: list = field(default_factory=list)
    later: list = field(default_factory=list)  # requests run() asks before writing


class ApplyPatchTool(Tool):
    name = "apply_patch"
    kind = "edit"  # writes files (side effect: changes the workspace, never runs anything)
    records_writes = True  # every file goes through ctx.before_write (tools/changeset.py)
    Params = ApplyPatchParams
    description = (
        "Add, update, delete and move files with one patch. Use it for multi-line changes, "
        "changes to several places or files, and new files. Format:\n" + FORMAT + "\n"
        "Hunks are found by their context and '-' lines (copy them exactly from the file, "
        "about 3 context lines around each change; line numbers are not used), in file "
        "order. Paths are relative to the workspace root. The whole patch applies or "
        "nothing does; a failure names the hunk and the line that did not match.")

    def title(self, args):
        return "Apply patch"

    def approval(self, args, ctx):
        try:
            ops = parse(args["input"])
        except PatchError as exc:
            raise ToolError(f"{exc} Nothing was changed.") from None
        changes = [self._change(op, ctx) for op in ops]
        _no_repeated_targets(ctx, changes)
        plan = PatchPlan(changes=changes, locations=_locations(changes))
        diffs = [change.diff() for change in changes]
        for real, verb in (t for change in changes for t in change.targets):
            if not can_edit(ctx, real):
                request = ApprovalRequest(variant=OUTSIDE_EDIT, path=real, content=diffs,
                                          title=f"{verb} {real}" + SENSITIVE_NOTE *
                                          is_sensitive(real))
                if plan.request is None:
                    plan.request = request
                elif all(r.path != real for r in plan.later):
                    plan.later.append(request)
        return plan

    def preview(self, args, ctx, plan):
        return [change.diff() for change in plan.changes]

    def _change(self, op, ctx):
        real = resolve_path(ctx, op.path)
        shown = display_path(ctx, real)
        if os.path.isdir(real):
            raise ToolError(f"{shown} is a directory; a patch adds, updates and deletes files.")
        if op.action == "add":
            if os.path.lexists(real):
                raise ToolError(f"{shown} already exists, so '*** Add File' cannot create it; "
                                "nothing was changed. Use '*** Update File' with hunks, or "
                                "create_file with overwrite=true to replace it whole.")
            text = "".join(line + "\n" for line in op.lines)
            size, limit = len(text.encode("utf-8")), edit_limit(ctx)
            if size > limit:
                raise over_limit(f"{shown} (the new file)", size, limit)
            return FileChange("add", real, new=text)
        if op.action == "delete":
            old, seen = _read_for_delete(ctx, real)
            return FileChange("delete", real, old=old, seen=seen)
        data, seen = read_bytes(ctx, real)
        if data is None:
            raise ToolError(f"{shown} does not exist, so '*** Update File' cannot change it; "
                            "nothing was changed. Use '*** Add File' to create it.")
        spliced = None
        if len(data) > REGION_OVER:  # a big file's plain case, in its bytes (tools/bigedit.py)
            spliced = offhub.heavy(len(data), bigedit.splice_hunks, data, op.hunks, shown)
        if spliced is not None:
            pieces, hunks, line, diff = spliced
            change = FileChange("update", real, seen=seen, hunks=hunks, data=data,
                                pieces=pieces, region=diff, line=line)
        else:
            old = decoded(data, shown)
            new, loose = offhub.heavy(len(old), _updated, old, op.hunks, shown)
            change = FileChange("update", real, old, new, seen, hunks=len(op.hunks),
                                loose=loose)
        if op.move_to is not None:
            dest = resolve_path(ctx, op.move_to)
            if dest != real and os.path.lexists(dest):
                raise ToolError(f"cannot move {shown} to {display_path(ctx, dest)}: that path "
                                "already exists; nothing was changed.")
            change.dest = dest if dest != real else None
        return change

    def run(self, args, ctx, plan=None):
        if plan is None:
            plan = self.approval(args, ctx)
            if plan.request is not None:
                raise not_approved(ctx, plan.request.path, plan.request.path, "written")
        for request in plan.later:
            if not can_edit(ctx, request.path) and not ctx.approve(request):
                raise ToolError(f"The user did not allow changing {request.path}; nothing of "
                                "the patch was applied. Do not retry it unchanged.")
        self._recheck(args, ctx, plan)
        _write_all(ctx, plan.changes)
        return ToolResult(_summary(ctx, plan.changes), content=[c.diff() for c in plan.changes],
                          locations=_locations(plan.changes, lines=True))

    def _recheck(self, args, ctx, plan):
        """Time of use: every path still resolves to the target the check saw."""
        ops = parse(args["input"])
        for op, change in zip(ops, plan.changes):
            for path, real in ((op.path, change.real), (op.move_to, change.dest)):
                if path is not None and real is not None and resolve_path(ctx, path) != real:
                    raise not_approved(ctx, path, resolve_path(ctx, path), "written")


def _updated(old, hunks, shown):
    """``(new text, loose hunks)`` of ``old`` after ``hunks`` (a big file's off the hub)."""
    try:
        spliced = splice_hunks(old, hunks)  # a big file's plain case, without lines
        return (spliced, []) if spliced is not None else apply_hunks(old, hunks, shown)
    except PatchError as exc:
        raise ToolError(str(exc)) from None


def _read_for_delete(ctx, real):
    """``(text or a note, identity)`` of a file to delete; any regular file may go."""
    fd = open_regular(ctx, real)
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        data = fh.read(REGION_OVER + 1) if st.st_size <= REGION_OVER else None
    try:
        text = data.decode("utf-8") if data is not None and b"\0" not in data else None
    except UnicodeDecodeError:
        text = None
    return (f"(binary or large file, {st.st_size} bytes)\n" if text is None else text), \
        identity(st)


def _no_repeated_targets(ctx, changes):
    seen = set()
    for real in (t[0] for change in changes for t in change.targets):
        if real in seen:
            raise ToolError(f"{display_path(ctx, real)} is the target of two operations of the "
                            "patch; put all its changes under one '*** Update File'. Nothing "
                            "was changed.")
        seen.add(real)


def _locations(changes, lines=False):
    out = []
    for change in changes:
        path = change.dest or change.real
        if lines and change.changes:
            out.append({"path": path, "line": change.line or first_changed_line(change.old,
                                                                                change.new)})
        else:
            out.append({"path": path})
    return out


def _write_all(ctx, changes):
    """Every change or none (module docstring)."""
    through_editor, written = [], []
    with ChangeSet(ctx) as local:
        for change in changes:
            if change.changes:
                target = change.dest or change.real
                seen = change.seen if change.dest is None else None
                if editor_io.editor_writes(ctx, target):
                    old, new = change.texts()
                    through_editor.append((target, new, seen,
                                           old if change.dest is None else None))
                else:
                    local.write(target, change.new if change.pieces is None else change.pieces,
                                seen)
            if not change.changes or change.dest is not None:
                local.delete(change.real, change.seen)
        try:
            for target, text, seen, old in through_editor:
                if not editor_io.write_via_editor(ctx, target, text, seen is None, seen):
                    raise ToolError(f"{display_path(ctx, target)} can no longer be written "
                                    "through the editor (a command started meanwhile); "
                                    "nothing of the patch was applied. Call it again.")
                written.append((target, old))
            local.commit()
        except (ToolError, EditorError):
            _restore_editor(ctx, written)
            raise


def _restore_editor(ctx, written):
    """Put back what the editor wrote before a later write failed (through the same
    checked paths: the editor for old text, a checked directory fd for a new file)."""
    for target, old in reversed(written):
        try:
            if old is None:
                parent, name = os.path.split(target)
                dfd = open_dirs(ctx, parent)
                try:
                    os.unlink(name, dir_fd=dfd)
                finally:
                    os.close(dfd)
            else:
                editor_io.write_via_editor(ctx, target, old, False)
        except (OSError, ToolError):
            pass  # the failure being raised names the patch as not applied; best effort here


def _summary(ctx, changes):
    lines = [f"Applied the patch ({len(changes)} file{'s' * (len(changes) != 1)}):"]
    for change in changes:
        shown = display_path(ctx, change.real)
        if change.action == "add":
            lines.append(f"A {shown} ({len(change.new.splitlines())} lines)")
        elif change.action == "delete":
            lines.append(f"D {shown}")
        else:
            what = f"{change.hunks} hunk{'s' * (change.hunks != 1)}"
            if change.dest is not None:
                lines.append(f"R {shown} -> {display_path(ctx, change.dest)} ({what})")
            else:
                lines.append(f"M {shown} ({what})")
        if change.loose:
            numbers = ", ".join(str(n) for n in change.loose)
            lines.append(f"  note: hunk {numbers} matched only when whitespace or punctuation "
                         "was ignored; check the result.")
    return "\n".join(lines)
