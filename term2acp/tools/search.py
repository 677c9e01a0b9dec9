"""Search tools: glob (find paths) and grep (find lines), both honouring .gitignore.

Both walk the tree with :class:`term2acp.tools.tree.TreeWalk`: symlinks are never
followed, ``.git`` is skipped and ``.gitignore`` rules prune unless ``no_ignore`` is set.
"""

import os
import re

from marshmallow import Schema, fields, validate

from term2acp.tools.base import Tool, ToolError, ToolResult
from term2acp.tools.files import SNIFF
from term2acp.tools.paths import display_path, located, read_approval, readable_path
from term2acp.tools.tree import MAX_WALK, TreeWalk, ignorer_for, path_matcher, read_regular

MAX_MATCHES = 200  # grep lines reported
MAX_GREP_BYTES = 2 * 1024 * 1024  # larger files are skipped by grep
MAX_LINE_CHARS = 300  # a reported grep line is cut here


class _SearchTool(Tool):
    kind = "search"

    def locations(self, args, ctx):
        return located(ctx, args.get("path") or ".")

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
