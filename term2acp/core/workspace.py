"""Workspace roots and path containment. Every check uses canonical, symlink-resolved paths."""

import os


class WorkspaceError(ValueError):
    """A cwd or path that cannot be used; the message is precise and user-facing."""


MAX_PATH = 4096


def validate_cwd(cwd):
    """Return the canonical root for a client-supplied ``cwd`` or raise WorkspaceError."""
    if not isinstance(cwd, str) or not cwd:
        raise WorkspaceError("cwd must be a non-empty string")
    if "\x00" in cwd:
        raise WorkspaceError("cwd must not contain NUL characters")
    if len(cwd.encode("utf-8", "surrogatepass")) > MAX_PATH:
        raise WorkspaceError(f"cwd is longer than {MAX_PATH} bytes")
    if not os.path.isabs(cwd):
        raise WorkspaceError("cwd must be an absolute path")
    try:
        real = os.path.realpath(cwd, strict=True)
    except (OSError, ValueError):
        raise WorkspaceError("cwd must exist and be a directory") from None
    if not os.path.isdir(real):
        raise WorkspaceError("cwd must exist and be a directory")
    if real == os.sep:
        raise WorkspaceError(
            "the workspace root cannot be / (the whole file system): the file tools could "
            "edit any file without asking and the shell sandbox cannot mount it. Open a "
            "project directory instead.")
    _require_utf8(real)
    return real


def validate_extra_root(path):
    """The canonical path of one of ``additionalDirectories``, or WorkspaceError naming it:
    each is a workspace like the cwd, so the same rules hold."""
    if not isinstance(path, str) or not path:
        raise WorkspaceError(f"additionalDirectories: {path!r} is not a non-empty path")
    shown = path.replace("\x00", "\\0")
    if "\x00" in path or not os.path.isabs(path):
        raise WorkspaceError(f"additionalDirectories: {shown} is not an absolute path")
    try:
        real = os.path.realpath(path, strict=True)
    except (OSError, ValueError):
        raise WorkspaceError(f"additionalDirectories: {shown} does not exist") from None
    if not os.path.isdir(real):
        raise WorkspaceError(f"additionalDirectories: {shown} is not a directory")
    if real == os.sep:
        raise WorkspaceError(f"additionalDirectories: {shown} is / (the whole file system); "
                             "name a project directory")
    try:
        _require_utf8(real)
    except WorkspaceError as exc:
        raise WorkspaceError(f"additionalDirectories: {exc}") from None
    return real


def is_utf8(text):
    """Whether ``text`` (a path, surrogate-escaped) can be stored and sent as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _require_utf8(real):
    """A root whose name has a non-UTF-8 byte (surrogate-escaped here) cannot be stored,
    listed or sent back over ACP's UTF-8 JSON, so it is refused with a precise message."""
    try:
        real.encode("utf-8")
    except UnicodeEncodeError:
        raw = os.fsencode(real)
        raise WorkspaceError(
            f"the workspace path {raw!r} contains bytes that are not valid UTF-8; such a "
            "path cannot be stored or sent over ACP's UTF-8 JSON. Rename the directory to a "
            "UTF-8 name, or open a parent directory whose path is UTF-8.") from None


def is_within(root, path):
    """True when canonical ``path`` is ``root`` or below it (no prefix tricks)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def resolve(root, path):
    """Resolve a tool path against ``root``: absolute paths stay, relative join the root.

    The result is canonical: symlinks resolved as far as the path exists (a missing tail
    is appended lexically after normalisation), so containment checks see the real target.
    """
    if not isinstance(path, str) or not path:
        raise WorkspaceError("path must be a non-empty string")
    if "\x00" in path:
        raise WorkspaceError("path must not contain NUL characters")
    joined = path if os.path.isabs(path) else os.path.join(root, path)
    return os.path.realpath(os.path.normpath(joined))


def contained(root, path):
    """Resolve ``path`` and report whether it stays inside ``root``: ``(real, inside)``."""
    real = resolve(root, path)
    return real, is_within(root, real)
