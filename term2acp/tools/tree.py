"""The workspace tree as the search tools see it: a walk that honours .gitignore.

The walk never follows symlinks (a link inside the root that points outside is listed by
name, never read), always skips ``.git``, and prunes what ``.gitignore`` files from the
search directory and its ancestors up to the root exclude. The matcher covers the common
rules: ``*``, ``?``, ``[...]``, ``**``, ``!negation``, ``dir/`` only, and patterns anchored
by a slash. Global excludes and ``.git/info/exclude`` are not read. The same glob
translation serves the ``glob`` pattern and grep's include/exclude.
"""

import os
import re
import stat

import gevent

from term2acp.sessions.workspace import is_within

MAX_WALK = 200_000  # entries visited before a search gives up
MAX_IGNORE_BYTES = 1024 * 1024


def glob_regex(pattern, braces=True):
    """Translate a glob to a regex body: ``*`` and ``?`` stay in one path segment, a whole
    ``**`` segment spans directories, ``[...]`` is a class, ``{a,b}`` alternates."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*" and pattern.startswith("**", i) and (i == 0 or pattern[i - 1] == "/") \
                and (i + 2 == n or pattern[i + 2] == "/"):
            out.append("(?:.*/)?" if i + 2 < n else ".*")
            i += 3
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and "]" in pattern[i + 2:]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1:end].replace("\\", "\\\\")
            out.append("[" + ("^" + body[1:] if body[0] in "!^" else body) + "]")
            i = end
        elif c == "{" and braces and _brace_end(pattern, i) > 0:
            end = _brace_end(pattern, i)
            parts = _split_top(pattern[i + 1:end])
            out.append("(?:" + "|".join(glob_regex(p, braces) for p in parts) + ")")
            i = end
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _brace_end(pattern, start):
    depth = 0
    for i in range(start, len(pattern)):
        depth += {"{": 1, "}": -1}.get(pattern[i], 0)
        if depth == 0:
            return i if "," in pattern[start:i] else -1
    return -1


def _split_top(body):
    parts, depth, last = [], 0, 0
    for i, c in enumerate(body):
        depth += {"{": 1, "}": -1}.get(c, 0)
        if c == "," and depth == 0:
            parts.append(body[last:i])
            last = i + 1
    return parts + [body[last:]]


def path_matcher(pattern):
    """A predicate on a relative path: patterns without a slash match the base name."""
    pattern = pattern.strip("/")
    regex = re.compile(glob_regex(pattern) + r"\Z")
    if "/" in pattern:
        return lambda rel: regex.match(rel) is not None
    return lambda rel: regex.match(rel.rpartition("/")[2]) is not None


def read_regular(path, limit):
    """``(data, size)`` of a regular file, data None when above ``limit``; None when ``path``
    is anything else. Never blocks (FIFOs, devices) and never follows a final symlink."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        return (fh.read(limit) if st.st_size <= limit else None), st.st_size


class Ignorer:
    """The .gitignore rules in force in one directory; the last matching rule decides."""

    def __init__(self, rules=()):
        self.rules = rules  # tuples (base dir, regex, negate, dir_only)

    def child(self, directory):
        read = read_regular(os.path.join(directory, ".gitignore"), MAX_IGNORE_BYTES)
        if not read or not read[0]:
            return self
        lines = read[0].decode("utf-8", errors="replace").splitlines()
        rules = [rule for line in lines if (rule := _rule(directory, line))]
        return Ignorer(self.rules + tuple(rules)) if rules else self

    def ignored(self, path, is_dir):
        for base, regex, negate, dir_only in reversed(self.rules):
            if dir_only and not is_dir or not is_within(base, path) or path == base:
                continue
            if regex.match(path[len(base.rstrip("/")) + 1:]):
                return not negate
        return False


def _rule(base, line):
    line = line.rstrip("\n\r")
    if not line.strip() or line.startswith("#"):
        return None
    line = line.rstrip(" ") if not line.endswith("\\ ") else line
    negate = line.startswith("!")
    line = line[1:] if negate else line.removeprefix("\\")
    dir_only = line.endswith("/")
    line = line.rstrip("/")
    if not line:
        return None
    body = glob_regex(line.lstrip("/"), braces=False)
    prefix = "" if "/" in line else "(?:.*/)?"
    return base, re.compile(prefix + body + r"\Z"), negate, dir_only


def ignorer_for(ctx, top):
    """Rules from the root's .gitignore down to ``top``'s parent (``top`` loads its own)."""
    ignorer = Ignorer()
    if not is_within(ctx.root, top) or top == ctx.root:
        return ignorer
    chain = os.path.relpath(os.path.dirname(top), ctx.root).split(os.sep)
    directory = ctx.root
    ignorer = ignorer.child(directory)
    for part in chain if chain != ["."] else []:
        directory = os.path.join(directory, part)
        ignorer = ignorer.child(directory)
    return ignorer


class TreeWalk:
    """Pre-order, sorted by name (so paths come out sorted), symlinks never followed;
    yields ``(DirEntry, is_dir)``. ``truncated`` tells whether MAX_WALK stopped it."""

    def __init__(self, top, ignorer, no_ignore=False, prune=None):
        self.top, self.ignorer, self.no_ignore = top, ignorer, no_ignore
        self.prune = prune or (lambda entry, is_dir: False)
        self.truncated = False

    def __iter__(self):
        stack, seen = [self._entries(self.top, self.ignorer)], 0
        while stack:
            item = next(stack[-1], None)
            if item is None:
                stack.pop()
                continue
            seen += 1
            if seen % 256 == 0:
                gevent.sleep(0)  # a big tree must not starve the hub (and cancel)
            if seen > MAX_WALK:
                self.truncated = True
                return
            entry, is_dir, ignorer = item
            if entry.name == ".git" or self.prune(entry, is_dir) or (
                    not self.no_ignore and ignorer.ignored(entry.path, is_dir)):
                continue
            yield entry, is_dir
            if is_dir:
                stack.append(self._entries(entry.path, ignorer))

    def _entries(self, directory, ignorer):
        ignorer = ignorer if self.no_ignore else ignorer.child(directory)
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            return iter(())
        return ((e, e.is_dir(follow_symlinks=False), ignorer) for e in entries)
