"""Overlay isolation: a ``general`` child works on a copy of the workspace, and its changes
reach the workspace only as one approved diff.

The copy is made in the agent's scratch space (``core/scratch.py``), file by file: a
reflink (``FICLONE``) where the filesystem can share the blocks copy-on-write, else a
plain copy. Never a hard link: a command writing a file in place would change the
workspace's file through it. The child's session has the copy as its root (its file
tools, its commands in the sandbox and its notes all see the copy), no checkpoint of the
parent's (nothing of the workspace changes while it runs), and grants over the copy.

When the child ends, what differs from the copy as it was made (files written, created,
deleted; ``.git`` excepted: its index and objects are the copy's own) is one question with
the diff (apply / discard). Before asking and again right before applying, every file
the child changed must be as it was in the workspace when the copy was made; if the user
(or anyone) changed one meanwhile, nothing is applied and the result names it. Applied
files go through the agent call's write path, so ``/undo`` of the turn takes them back.
"""

import difflib
import fcntl
import os
import shutil
import stat

from gevent import get_hub

from term2acp.core import scratch
from term2acp.core.approvals import ORDINARY, ApprovalRequest
from term2acp.tools.atomic import write_atomically
from term2acp.core.workspace import is_within
from term2acp.tools.base import ToolError, identity

FICLONE = 0x40049409  # linux/fs.h: _IOW(0x94, 9, int)
SKIP = frozenset({".git"})  # folders neither compared nor applied
CHOICES = (("apply", "Apply the changes", "allow_once"),
           ("discard", "Discard them", "reject_once"))
PATCH_CAP = 20_000  # characters of the diff the model gets back


class Change:
    __slots__ = ("rel", "old", "new")

    def __init__(self, rel, old, new):
        self.rel, self.old, self.new = rel, old, new  # bytes, None: absent


class Overlay:
    """The copy of ``root`` one child works on."""

    def __init__(self, root):
        self.root = root
        self.base = scratch.make("overlay-")
        self.copy = os.path.join(self.base, os.path.basename(root.rstrip("/")) or "work")
        self.before = {}  # rel -> identity of the workspace's file as it was copied
        self.copied = {}  # rel -> identity of the copy as made

    def make(self):
        """Copy the workspace (in a thread of the hub's pool: the hub keeps serving)."""
        if is_within(self.root, os.path.realpath(self.base)):
            raise ToolError(f"isolation overlay cannot copy {self.root}: it holds the agent's "
                            "scratch folder. Run the sub-agent without isolation.")
        get_hub().threadpool.apply(self._copy_tree)

    def remove(self):
        shutil.rmtree(self.base, ignore_errors=True)

    def _copy_tree(self):
        shutil.copytree(self.root, self.copy, symlinks=True, copy_function=self._copy_file,
                        ignore=_specials)

    def _copy_file(self, src, dst):
        with open(src, "rb") as fin:
            info = os.fstat(fin.fileno())
            with open(dst, "wb") as fout:
                try:
                    fcntl.ioctl(fout.fileno(), FICLONE, fin.fileno())
                except OSError:  # no shared blocks on this filesystem: a real copy
                    shutil.copyfileobj(fin, fout, 1 << 20)
        shutil.copystat(src, dst)
        rel = os.path.relpath(src, self.root)
        self.before[rel] = identity(info)
        self.copied[rel] = identity(os.stat(dst))

    # ------------------------------------------------------------ the child's changes
    def changes(self):
        """What the child changed, as :class:`Change`\\ s (sorted by path)."""
        out, present = [], set()
        for rel, path in _files(self.copy):
            present.add(rel)
            if rel in self.copied and identity(os.stat(path)) == self.copied[rel]:
                continue
            new = _read(path)
            old = _read(os.path.join(self.root, rel)) if rel in self.before else None
            if new != old:
                out.append(Change(rel, old, new))
        for rel in self.before:
            if rel not in present:
                out.append(Change(rel, _read(os.path.join(self.root, rel)), None))
        return sorted(out, key=lambda c: c.rel)

    def conflicts(self, changes):
        """The paths changed in the workspace since the copy was made."""
        out = []
        for change in changes:
            real = os.path.join(self.root, change.rel)
            try:
                now = identity(os.lstat(real))
            except FileNotFoundError:
                now = None
            if now != self.before.get(change.rel):
                out.append(change.rel)
        return out

    def apply(self, ctx, changes):
        for change in changes:
            real = os.path.join(self.root, change.rel)
            if change.new is None:
                ctx.before_write(real)
                os.unlink(real)
                continue
            os.makedirs(os.path.dirname(real), exist_ok=True)
            write_atomically(ctx, real, change.new, exclusive=change.rel not in self.before)

    def settle(self, ctx):
        """Ask, apply or not; returns ``(text for the model, display items)``."""
        changes = self.changes()
        if not changes:
            return "The sub-agent changed no files (overlay: nothing to apply).", []
        items, patch = self.shown(changes), _patch(changes)
        conflicts = self.conflicts(changes)
        if not conflicts:
            request = ApprovalRequest(variant=ORDINARY, choices=CHOICES, content=items,
                                      title=f"Apply the sub-agent's changes to "
                                            f"{len(changes)} file(s)?")
            if ctx.choose(request) != "apply":
                return f"Not applied: the user discarded the changes.\n{patch}", items
            conflicts = self.conflicts(changes)
        if conflicts:
            return ("Not applied (nothing was): changed in the workspace while the "
                    f"sub-agent worked: {', '.join(conflicts)}.\n{patch}"), items
        self.apply(ctx, changes)
        return f"Applied to the workspace:\n{patch}", items

    def shown(self, changes):
        items = []
        for change in changes:
            old, new = _text(change.old), _text(change.new)
            if old is False or new is False:
                items.append({"type": "text", "text": f"Binary file changed: {change.rel}"})
            else:
                items.append({"type": "diff", "path": os.path.join(self.root, change.rel),
                              "old": old, "new": new})
        return items


def _specials(folder, names):
    """Entries copytree must not open (FIFOs, sockets, devices)."""
    out = []
    for name in names:
        try:
            mode = os.lstat(os.path.join(folder, name)).st_mode
        except OSError:
            out.append(name)
            continue
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
            out.append(name)
    return out


def _files(top):
    """``(rel, path)`` of every regular file under ``top`` (symlinks not followed)."""
    for folder, dirs, names in os.walk(top):
        dirs[:] = [d for d in dirs if not (folder == top and d in SKIP)]
        for name in names:
            path = os.path.join(folder, name)
            if stat.S_ISREG(os.lstat(path).st_mode):
                yield os.path.relpath(path, top), path


def _read(path):
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except (FileNotFoundError, IsADirectoryError):
        return None


def _text(data):
    """``data`` as text, None when absent, False when it is not UTF-8 text."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return False


def _patch(changes):
    out = []
    for change in changes:
        old, new = _text(change.old), _text(change.new)
        if old is False or new is False:
            out.append(f"Binary file {change.rel} changed\n")
            continue
        out.extend(difflib.unified_diff(
            (old or "").splitlines(keepends=True), (new or "").splitlines(keepends=True),
            "/dev/null" if old is None else f"a/{change.rel}",
            "/dev/null" if new is None else f"b/{change.rel}"))
    text = "".join(line if line.endswith("\n") else line + "\n" for line in out)
    return text if len(text) <= PATCH_CAP else text[:PATCH_CAP] + "\n[... diff cut ...]\n"
