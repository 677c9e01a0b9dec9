"""The path policy every file tool shares: resolution, display, approval and re-checks.

Paths resolve against the session root (relative) or as given (absolute), symlinks and all,
so a link inside the root that points outside counts as outside. Reads inside the root,
or inside a folder the session granted, need no approval; anything else asks for a
``folder_read`` grant of the containing folder. Edits inside the root need no approval;
a target outside it asks for an ``outside_workspace_edit`` grant.

The approval check resolves a call's path once and returns a :class:`~term2acp.tools.base.Plan`
(:func:`read_plan`, ``tools/edit.py``): the target, the locations the call reports and the
request, if any. ``run()`` gets that plan (the checked one, allowed if it asked) and resolves
the path once more at the time of use: a target that moved in between (a swapped symlink)
is refused, unless a read lands where it could go without asking anyway
(:func:`readable_path`, :func:`recheck_target`). A target outside the root that the check
saw, and so was shown to the user, stays allowed for that one call (the "allow once"
answer) because it is the plan's target; nothing is remembered beyond the plan.

Credential and shell start-up files (:mod:`term2acp.core.sensitive`) always ask, even
inside the root and even when a session grant covers them: grants never cover them.

Time of use: every open goes through :func:`open_checked`, which never follows a final
symlink and asks the kernel once whether the fd it got really is the path the policy
allowed (a directory swapped for a symlink mid-walk fails that check).
"""

import errno
import os

from term2acp.core.approvals import FOLDER_READ, OUTSIDE_EDIT, ApprovalRequest
from term2acp.core.sensitive import is_sensitive
from term2acp.core.workspace import WorkspaceError, is_within, resolve
from term2acp.tools.base import Plan, ToolError


def resolve_path(ctx, path):
    """The canonical target of a tool ``path`` argument, or ToolError."""
    try:
        return resolve(ctx.root, path)
    except (WorkspaceError, OSError, ValueError) as exc:
        raise ToolError(f"invalid path {path!r}: {exc}") from None


def located(ctx, path, **extra):
    """``locations()`` of a tool acting on ``path``; [] when it does not resolve. Only for a
    call whose plan could not be made (its own resolution); a plan carries its locations."""
    try:
        return [{"path": resolve_path(ctx, path), **extra}]
    except ToolError:
        return []


def display_path(ctx, real):
    """Root-relative when inside the root (what the model passes back), else absolute."""
    if real == ctx.root:
        return "."
    if is_within(ctx.root, real):
        return os.path.relpath(real, ctx.root)
    return real


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


def not_approved(ctx, path, real, verb):
    """The refusal of a target this call's (approved) check did not cover."""
    if is_sensitive(real):
        return sensitive_error(ctx, path, real, verb)
    return moved_error(ctx, path, real, verb)


SENSITIVE_NOTE = " (a credential or shell start-up file: asked every time)"


def can_read(ctx, real):
    """Readable without asking: inside a readable folder and not a credential file."""
    return ctx.access.can_read(real) and not is_sensitive(real)


def can_edit(ctx, real):
    """Editable without asking: inside an editable place and not a credential file."""
    return ctx.access.can_edit(real) and not is_sensitive(real)


def read_plan(ctx, path, title, **location):
    """The plan of a read of ``path``: its target, its location (``location`` adds e.g. the
    line) and a ``folder_read`` request when it is outside every readable folder or
    sensitive."""
    real = resolve_path(ctx, path)
    plan = Plan(target=real, locations=[{"path": real, **location}])
    if not can_read(ctx, real):
        folder = real if os.path.isdir(real) else os.path.dirname(real)
        plan.request = ApprovalRequest(variant=FOLDER_READ, path=folder,
                                       title=title + SENSITIVE_NOTE * is_sensitive(real))
    return plan


def readable_path(ctx, path, plan=None):
    """Resolve ``path`` again at the time of use: the target of ``plan`` (the checked and,
    if it asked, allowed one), or any target readable without asking; else ToolError."""
    real = resolve_path(ctx, path)
    if plan is not None and real == plan.target or can_read(ctx, real):
        return real
    raise not_approved(ctx, path, real, "read")


def edit_request(ctx, real, verb, preview):
    """``outside_workspace_edit`` request showing ``preview`` (the whole-file diff)."""
    return ApprovalRequest(variant=OUTSIDE_EDIT, path=real, content=[preview],
                           title=f"{verb} {real}" + SENSITIVE_NOTE * is_sensitive(real))


def recheck_target(ctx, path, plan):
    """Right before writing: ``path`` must still resolve to the plan's target."""
    real = resolve_path(ctx, path)
    if real != plan.target:
        raise not_approved(ctx, path, real, "written")


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
