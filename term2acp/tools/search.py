"""Search tools: glob (find paths) and grep (find lines), both honouring .gitignore.

The tree walk never follows symlinks (a link inside the root that points outside is
listed by name, never read), always skips ``.git``, and prunes what ``.gitignore`` files
from the search directory and its ancestors up to the root exclude. The matcher covers
the common rules: ``*``, ``?``, ``[...]``, ``**``, ``!negation``, ``dir/`` only, and
patterns anchored by a slash. Global excludes and ``.git/info/exclude`` are not read.
"""

import os
import re
import stat

import gevent
from marshmallow import Schema, fields, validate

from term2acp.sessions.workspace import is_within
from term2acp.tools.base import Tool, ToolError, ToolResult
from term2acp.tools.files import (SNIFF, display_path, read_approval, readable_path,
                                  resolve_path)

MAX_WALK = 200_000  # entries visited before a search gives up
MAX_MATCHES = 200  # grep lines reported
MAX_GREP_BYTES = 2 * 1024 * 1024  # larger files are skipped by grep
MAX_LINE_CHARS = 300  # a reported grep line is cut here
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


class _SearchTool(Tool):
    kind = "search"

    def locations(self, args, ctx):
        try:
            return [{"path": resolve_path(ctx, args.get("path") or ".")}]
        except ToolError:
            return []

    def approval(self, args, ctx):
        return read_approval(ctx, args.get("path") or ".", self.title(args))

    def _top(self, args, ctx):
        real = readable_path(ctx, args.get("path") or ".")
        if not os.path.exists(real):
            raise ToolError(f"{display_path(ctx, real)} does not exist.")
        return real


class GlobParams(Schema):
    pattern = fields.String(required=True, validate=validate.Length(min=1), metadata={
        "description": "Glob such as **/*.py or src/**/test_*.{ts,tsx}. Without a slash it "
                       "matches file names at any depth."})
    path = fields.String(load_default=None, metadata={
        "description": "Directory to search. Default: the workspace root."})
    max_results = fields.Integer(load_default=200, validate=validate.Range(min=1, max=2000),
                                 metadata={"description": "Most paths to return. Default: 200."})
    no_ignore = fields.Boolean(load_default=False, metadata={
        "description": "Also search files excluded by .gitignore."})


class GlobTool(_SearchTool):
    name = "glob"
    Params = GlobParams
    description = (
        "Find files and directories by glob pattern, sorted by path; directories end in /. "
        "Skips .git and files excluded by .gitignore unless no_ignore is true. Symlinks are "
        "listed but not followed.")

    def title(self, args):
        where = f" in {args['path']}" if args.get("path") else ""
        return f"Glob {args.get('pattern')}{where}"

    def run(self, args, ctx):
        pattern = args["pattern"].removeprefix("./")
        if ".." in pattern.split("/") or os.path.isabs(pattern):
            raise ToolError("pattern must be relative and must not contain '..'; put the "
                            "directory to search in path instead.")
        top = self._top(args, ctx)
        if not os.path.isdir(top):
            raise ToolError(f"{display_path(ctx, top)} is not a directory; glob searches "
                            "directories (use path for the directory, pattern for names).")
        matches = path_matcher(pattern)
        walk = TreeWalk(top, ignorer_for(ctx, top), args["no_ignore"])
        found, limit, more = [], args["max_results"], 0
        for entry, is_dir in walk:
            if matches(os.path.relpath(entry.path, top)):
                if len(found) < limit:
                    found.append(display_path(ctx, entry.path) + "/" * is_dir)
                else:
                    more += 1
        lines = found or [f"No paths match {pattern} in {display_path(ctx, top)}."]
        if more:
            lines.append(f"[{more} more matches not shown; narrow the pattern or raise "
                         "max_results.]")
        if walk.truncated:
            lines.append(f"[search stopped after {MAX_WALK} entries; use a narrower path.]")
        return ToolResult("\n".join(lines), locations=[{"path": top}])


class GrepParams(Schema):
    pattern = fields.String(required=True, validate=validate.Length(min=1), metadata={
        "description": "Python regular expression (or plain text with fixed_strings)."})
    path = fields.String(load_default=".", metadata={
        "description": "File or directory to search. Default: the workspace root."})
    fixed_strings = fields.Boolean(load_default=False, metadata={
        "description": "Treat pattern as plain text, not a regular expression."})
    ignore_case = fields.Boolean(load_default=False, metadata={
        "description": "Match case-insensitively."})
    include = fields.String(load_default=None, metadata={
        "description": "Only search files matching this glob, e.g. *.py or *.{ts,tsx}."})
    exclude = fields.String(load_default=None, metadata={
        "description": "Skip files and directories matching this glob, e.g. tests or *.min.js."})
    no_ignore = fields.Boolean(load_default=False, metadata={
        "description": "Also search files excluded by .gitignore."})


class GrepTool(_SearchTool):
    name = "grep"
    Params = GrepParams
    description = (
        f"Search file contents line by line. Output lines are path:line: text, at most "
        f"{MAX_MATCHES} matches. Skips .git, files excluded by .gitignore (unless no_ignore), "
        f"binary files, files over {MAX_GREP_BYTES // 2**20} MiB and symlinks.")

    def title(self, args):
        where = f" in {args['path']}" if args.get("path") not in (None, ".") else ""
        return f"Grep {args.get('pattern')}{where}"

    def run(self, args, ctx):
        regex = _compile(args)
        top = self._top(args, ctx)
        walk, paths = None, [top]
        if os.path.isdir(top):
            walk = self._walk(args, ctx, top)
            paths = self._files(args, walk, top)
        elif read_regular(top, 0) is None:
            raise ToolError(f"{display_path(ctx, top)} is not a regular file; grep searches "
                            "regular files and directories.")
        hits, skipped = [], {"binary": 0, "big": 0}
        for path in paths:
            text = _searchable(path, skipped)
            for lineno, line in _matching_lines(regex, text, MAX_MATCHES + 1 - len(hits)):
                hits.append(f"{display_path(ctx, path)}:{lineno}: {_cut(line)}")
            if len(hits) > MAX_MATCHES:
                break
        return ToolResult(self._report(args, ctx, top, hits, skipped, walk),
                          locations=[{"path": top}])

    def _walk(self, args, ctx, top):
        prune = None
        if args["exclude"]:
            exclude = path_matcher(args["exclude"])
            prune = lambda entry, is_dir: exclude(os.path.relpath(entry.path, top))  # noqa: E731
        return TreeWalk(top, ignorer_for(ctx, top), args["no_ignore"], prune)

    def _files(self, args, walk, top):
        include = path_matcher(args["include"]) if args["include"] else None
        for entry, is_dir in walk:
            if is_dir or not entry.is_file(follow_symlinks=False):
                continue
            if include is None or include(os.path.relpath(entry.path, top)):
                yield entry.path

    def _report(self, args, ctx, top, hits, skipped, walk):
        shown = display_path(ctx, top)
        lines = hits[:MAX_MATCHES] or [f"No matches for {args['pattern']} in {shown}."]
        if len(hits) > MAX_MATCHES:
            lines.append(f"[showing the first {MAX_MATCHES} matches; narrow the search with "
                         "path, include or a more specific pattern.]")
        if skipped["binary"] or skipped["big"]:
            lines.append(f"[skipped {skipped['binary']} binary files and {skipped['big']} files "
                         f"over {MAX_GREP_BYTES // 2**20} MiB.]")
        if walk is not None and walk.truncated:
            lines.append(f"[search stopped after {MAX_WALK} entries; use a narrower path.]")
        return "\n".join(lines)


def _compile(args):
    source = re.escape(args["pattern"]) if args["fixed_strings"] else args["pattern"]
    flags = re.MULTILINE | (re.IGNORECASE if args["ignore_case"] else 0)
    try:
        return re.compile(source, flags)
    except re.error as exc:
        raise ToolError(f"invalid regular expression {args['pattern']!r}: {exc}. Fix it, or "
                        "set fixed_strings to true to search for the text literally.") from None


def _searchable(path, skipped):
    """The text of a file worth searching, else "" (binary and big files are counted)."""
    read = read_regular(path, MAX_GREP_BYTES)
    if read is None:
        return ""
    if read[0] is None:
        skipped["big"] += 1
        return ""
    if b"\0" in read[0][:SNIFF]:
        skipped["binary"] += 1
        return ""
    return read[0].decode("utf-8", errors="replace")


def _matching_lines(regex, text, limit):
    """``(line number, line)`` for each line with a match, at most ``limit``."""
    lineno, pos, last = 1, 0, 0
    for match in regex.finditer(text):
        lineno += text.count("\n", pos, match.start())
        pos = match.start()
        if lineno == last:
            continue
        last, limit = lineno, limit - 1
        start, end = text.rfind("\n", 0, pos) + 1, text.find("\n", pos)
        yield lineno, text[start:len(text) if end == -1 else end].rstrip("\r")
        if limit <= 0:
            return


def _cut(line):
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + "…"
