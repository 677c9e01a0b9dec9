"""Files the user or the workspace keeps for agents (commands, skills): where they are, and
a cheap look at them before every prompt.

A folder is listed and each file stat-ed (size, mtime); a file is read and parsed again
only when that changed, so a prompt costs a ``scandir`` and a ``stat`` per file
(``bench/extend``); a first look at hundreds of files reads and parses them in slices of a
few milliseconds, the hub answering between them. A project file that belongs, or whose
folder belongs, to another user is left out and named in ``foreign`` (``core/trust.py``
tells the user).
"""

import logging
import os
import stat
import time

import gevent

from term2acp.core.trust import foreign_owner

log = logging.getLogger(__name__)

FILE_CAP = 256 * 1024  # bytes of one command or skill file that are read
SLICE = 0.005  # seconds of reading and parsing before the hub gets its turn
_FENCE = "---"


def home(settings):
    """Whose ``~/.claude``, ``~/.codex``, ``~/.gemini`` and ``~/.agents`` count:
    ``TERM2ACP_PEERS_HOME`` (the test kit's is empty), else ``HOME``."""
    env = settings.env
    return env.get("TERM2ACP_PEERS_HOME") or env.get("HOME") or os.path.expanduser("~")


def config_dir(settings):
    """The user's config dir: the folder of ``config.toml``."""
    return os.path.dirname(settings.config_path) or None


def front_matter(text):
    """``(fields, body)`` of a Markdown file with optional YAML front matter between
    ``---`` lines (Claude's and Codex's commands, Agent Skills). Fields that are not a
    mapping, or YAML that does not parse, give no fields (logged)."""
    if not text.startswith(_FENCE):
        return {}, text
    lines = text.split("\n")
    if lines[0].strip() != _FENCE:
        return {}, text
    for index in range(1, len(lines)):
        if lines[index].strip() == _FENCE:
            head, body = "\n".join(lines[1:index]), "\n".join(lines[index + 1:])
            break
    else:
        return {}, text
    import yaml  # only when a file has front matter

    try:  # libyaml's loader where PyYAML has it (ten times as fast), else the Python one
        fields = yaml.load(head, Loader=_LOADER or _loader(yaml)) if head.strip() else {}
    except yaml.YAMLError as exc:
        log.info("front matter does not parse: %s", exc)
        return {}, body
    return (fields if isinstance(fields, dict) else {}), body


_LOADER = None


def _loader(yaml):
    global _LOADER
    _LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return _LOADER


def text_field(fields, *names):
    """The first of ``names`` that is a non-empty scalar, as one line of text, or None."""
    for name in names:
        value = fields.get(name)
        if isinstance(value, (str, int, float)) and str(value).strip():
            return " ".join(str(value).split())
    return None


def read(path):
    """The bytes of a regular file (never a FIFO, a device or a file above the cap), or
    None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, FILE_CAP)
    finally:
        os.close(fd)


class Folder:
    """The files of one folder that a parser accepts, re-parsed only when they change.

    ``parse(path, data) -> item or None``; ``pick(entry) -> path or None`` chooses the
    files (a command file, or a skill folder's ``SKILL.md``); ``project``: the workspace
    supplies it (the owner check applies)."""

    def __init__(self, path, pick, parse, project):
        self.path, self.pick, self.parse, self.project = path, pick, parse, project
        self._cache = {}  # file path -> (signature, item)

    def scan(self):
        """``(items, foreign paths)`` in name order."""
        try:
            entries = sorted(os.scandir(self.path), key=lambda e: e.name)
        except OSError:
            self._cache.clear()
            return [], []
        if self.project and foreign_owner(os.path.join(self.path, ".")) is not None:
            return [], [self.path]
        trusted = (os.geteuid(), 0)
        items, foreign, seen = [], [], {}
        began = time.monotonic()
        for entry in entries:
            path = self.pick(entry)
            if path is None:
                continue
            try:
                info = os.stat(path)
            except OSError:
                continue
            if not stat.S_ISREG(info.st_mode):
                continue
            if self.project and (info.st_uid not in trusted or _foreign_folder(
                    path, self.path, entry, trusted)):  # the file, or a skill's folder
                foreign.append(path)
                continue
            signature = (info.st_size, info.st_mtime_ns, info.st_ino)
            cached = self._cache.get(path)
            if cached is None or cached[0] != signature:
                data = read(path)
                item = None if data is None else self._parse(path, data)
                cached = (signature, item)
                if time.monotonic() - began > SLICE:  # hundreds of new files: in slices
                    gevent.idle()  # I/O and timers run here too (sleep(0) would not)
                    began = time.monotonic()
            seen[path] = cached
            if cached[1] is not None:
                items.append(cached[1])
        self._cache = seen
        return items, foreign

    def _parse(self, path, data):
        try:
            return self.parse(path, data)
        except Exception as exc:  # noqa: BLE001 - one broken file never hides the others
            log.warning("%s skipped: %s: %s", path, type(exc).__name__, exc)
            return None


def _foreign_folder(path, top, entry, trusted):
    if os.path.dirname(path) == top:
        return False  # the folder scanned, checked once
    try:
        return entry.stat(follow_symlinks=False).st_uid not in trusted
    except OSError:
        return True


def files_ending(suffix):
    def pick(entry):
        return entry.path if entry.name.endswith(suffix) and not entry.name.startswith(".") \
            else None
    return pick


def skill_file(entry):
    """``<folder>/SKILL.md`` of a skill folder entry."""
    if entry.name.startswith(".") or not entry.is_dir():
        return None
    return os.path.join(entry.path, "SKILL.md")
