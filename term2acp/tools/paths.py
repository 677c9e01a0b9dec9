"""The path policy every file tool shares: resolution, display, approval and re-checks.

Paths resolve against the session root (relative) or as given (absolute), symlinks and all,
so a link inside the root that points outside counts as outside. Reads inside the root,
or inside a folder the session granted, need no approval; anything else asks for a
``folder_read`` grant of the containing folder. Edits inside the root need no approval;
a target outside it asks for an ``outside_workspace_edit`` grant.

The approval check runs before ``run()``, so ``run()`` resolves again and refuses a target
that moved in between (a swapped symlink). A target outside the root that the approval
check itself saw, and so was shown to the user, stays allowed for that one call (the
"allow once" answer): :func:`mark_checked` records it per :class:`ToolContext`, which is
why the turn must pass the same context to ``approval()`` and ``run()``. Before ``run()``,
``locations()`` and ``approval()`` share one resolution per call (:func:`planned_path`).

Credential and shell start-up files (:mod:`term2acp.core.sensitive`) always ask, even
inside the root and even when a session grant covers them: grants never cover them.

Time of use: every open goes through :func:`open_checked`, which never follows a final
symlink and asks the kernel once whether the fd it got really is the path the policy
allowed (a directory swapped for a symlink mid-walk fails that check).
"""

import errno
import os
import weakref

from term2acp.core.approvals import FOLDER_READ, OUTSIDE_EDIT, ApprovalRequest
from term2acp.core.sensitive import is_sensitive
from term2acp.core.workspace import WorkspaceError, is_within, resolve
from term2acp.tools.base import ToolError

# ToolContext -> canonical targets the approval check evaluated for that call.
_checked = weakref.WeakKeyDictionary()
# ToolContext -> {path argument: canonical target} resolved before run(); run() drops it.
_planned = weakref.WeakKeyDictionary()


def resolve_path(ctx, path):
    """The canonical target of a tool ``path`` argument, or ToolError."""
    try:
        return resolve(ctx.root, path)
    except (WorkspaceError, OSError, ValueError) as exc:
        raise ToolError(f"invalid path {path!r}: {exc}") from None


def planned_path(ctx, path):
    """The target of ``path`` for reporting and the approval check: resolved once per call.

    Never for ``run()``, which must see the target as it is when it acts: see
    :func:`readable_path` and :func:`editable_path`, which resolve afresh and drop this.
    """
    plan = _planned.get(ctx)
    if plan is None:
        plan = _planned[ctx] = {}
    real = plan.get(path)
    if real is None:
        real = plan[path] = resolve_path(ctx, path)
    return real


def drop_planned(ctx):
    _planned.pop(ctx, None)


def located(ctx, path, **extra):
    """``locations()`` of a tool acting on ``path``; [] when it does not resolve."""
    try:
        return [{"path": planned_path(ctx, path), **extra}]
    except ToolError:
        return []


def display_path(ctx, real):
    """Root-relative when inside the root (what the model passes back), else absolute."""
    if real == ctx.root:
        return "."
    if is_within(ctx.root, real):
        return os.path.relpath(real, ctx.root)
    return real


def mark_checked(ctx, real):
    _checked.setdefault(ctx, set()).add(real)


def is_checked(ctx, real):
    return real in _checked.get(ctx, ())


def moved_error(ctx, path, real, verb):
    where = real if path == real else f"{path} (resolving to {real})"
    return ToolError(
        f"{where} is outside the workspace and this call was not approved for it; the target "
        f"may have changed after the permission check (e.g. a swapped symlink). Nothing was "
        f"{verb}. Call the tool again so the new target can be checked.")


def sensitive_error(ctx, path, real, verb):
    where = real if path == real else f"{path} (resolving to {real})"
    return ToolError(
        f"{where} is a credential or shell start-up file and this call was not approved "
        f"for it. Nothing was {verb}. Call the tool again so the user can be asked.")


SENSITIVE_NOTE = " (a credential or shell start-up file: asked every time)"


def can_read(ctx, real):
    """Readable without asking: inside a readable folder and not a credential file."""
    return ctx.access.can_read(real) and not is_sensitive(real)


def read_approval(ctx, path, title):
    """``folder_read`` request for a target outside every readable folder or sensitive."""
    real = planned_path(ctx, path)
    if can_read(ctx, real):
        return None
    mark_checked(ctx, real)
    folder = real if os.path.isdir(real) else os.path.dirname(real)
    if is_sensitive(real):
        title += SENSITIVE_NOTE
    return ApprovalRequest(variant=FOLDER_READ, path=folder, title=title)


def readable_path(ctx, path):
    """Resolve again at run time and require the target to still be readable."""
    drop_planned(ctx)
    real = resolve_path(ctx, path)
    if is_checked(ctx, real) or can_read(ctx, real):
        return real
    if is_sensitive(real):
        raise sensitive_error(ctx, path, real, "read")
    raise moved_error(ctx, path, real, "read")


def edit_approval(ctx, real, verb, preview):
    """``outside_workspace_edit`` request showing ``preview()``, unless ``real`` is editable.

    ``preview()`` returns the content item shown with the request (the whole-file diff) and
    raises ToolError when the call cannot succeed, so nobody is asked to approve an edit
    that would fail anyway.
    """
    sensitive = is_sensitive(real)
    if ctx.access.can_edit(real) and not sensitive:
        return None
    shown = preview()
    mark_checked(ctx, real)
    return ApprovalRequest(variant=OUTSIDE_EDIT, path=real, content=[shown],
                           title=f"{verb} {real}" + SENSITIVE_NOTE * sensitive)


def editable_path(ctx, path):
    """Resolve ``path`` at run time and require the target to still be editable."""
    drop_planned(ctx)
    real = resolve_path(ctx, path)
    if is_checked(ctx, real) or ctx.access.can_edit(real) and not is_sensitive(real):
        return real
    if is_sensitive(real):
        raise sensitive_error(ctx, path, real, "written")
    raise moved_error(ctx, path, real, "written")


def recheck_editable(ctx, path, real):
    """Right before writing: ``path`` must still resolve to ``real``, and that be editable."""
    if editable_path(ctx, path) != real:
        raise moved_error(ctx, path, resolve_path(ctx, path), "written")


def same_place(fd, path):
    """True when the open ``fd`` really is ``path`` (the kernel's view, not the name's)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}") == path
    except OSError:  # no /proc: compare identities instead
        try:
            opened, named = os.fstat(fd), os.stat(path, follow_symlinks=False)
        except OSError:
            return False
        return (opened.st_dev, opened.st_ino) == (named.st_dev, named.st_ino)


class PathMoved(OSError):
    """The fd an open returned is not the path that was checked (something was swapped)."""

    def __init__(self, path):
        super().__init__(errno.ESTALE, "it changed while being opened (a symlink or another "
                         "directory was swapped in)", path)


_OPEN_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY
FILE_FLAGS = os.O_RDONLY


def open_checked(expected, flags, dir_fd=None):
    """Open canonical ``expected`` (by base name relative to ``dir_fd`` when given) without
    following a final symlink, never blocking; then the one time-of-use check: the kernel's
    path of the fd must be ``expected``. Returns the fd; OSError (PathMoved) otherwise."""
    name = os.path.basename(expected) if dir_fd is not None else expected
    fd = os.open(name, flags | _OPEN_FLAGS, dir_fd=dir_fd)
    if not same_place(fd, expected):
        os.close(fd)
        raise PathMoved(expected)
    return fd
