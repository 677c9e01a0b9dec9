"""Search tools: glob (find paths) and grep (find lines), both honouring .gitignore.

Both walk the tree with :class:`term2acp.tools.tree.TreeWalk`: by directory fds, each
open checked once at the moment it happens, symlinks never followed, ``.git`` skipped,
credential files skipped (counted in a note), ``.gitignore`` rules pruning unless
``no_ignore`` is set. Every pattern is matched by RE2 (:mod:`term2acp.tools.patterns`),
which never backtracks; grep searches a file in slices of lines and the walk's
:class:`~term2acp.tools.tree.Pacer` yields to the hub between them and bounds the whole
search in time.
"""

import os
import stat

from marshmallow import Schema, fields, validate

from term2acp.tools.base import Tool, ToolError, ToolResult
from term2acp.tools.files import SNIFF
from term2acp.tools.paths import (FILE_FLAGS, display_path, located, open_checked, read_plan,
                                  readable_path)
from term2acp.tools.patterns import PatternError, compile_grep, path_matcher
from term2acp.tools.tree import MAX_WALK, Pacer, TreeWalk, ignorer_for

MAX_MATCHES = 200  # grep lines reported
MAX_GREP_BYTES = 2 * 1024 * 1024  # larger files are skipped by grep
MAX_LINE_CHARS = 300  # a reported grep line is cut here
# One RE2 call costs at worst about 35 ns per byte per program instruction (when its DFA
# gives up and it falls back to the NFA), so each call gets WORK / program size bytes.
WORK = 2_000_000  # byte-instructions per RE2 call (about 70 ms at worst)
MIN_SLICE, MAX_SLICE = 512, 64 * 1024


class _SearchTool(Tool):
    kind = "search"

    def locations(self, args, ctx):
        return located(ctx, args.get("path") or ".")

    def approval(self, args, ctx):
        return read_plan(ctx, args.get("path") or ".", self.title(args))

    def _top(self, args, ctx, plan):
        real = readable_path(ctx, args.get("path") or ".", plan)
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

    def run(self, args, ctx, plan=None):
        pattern = args["pattern"].removeprefix("./")
        if ".." in pattern.split("/") or os.path.isabs(pattern):
            raise ToolError("pattern must be relative and must not contain '..'; put the "
                            "directory to search in path instead.")
        top = self._top(args, ctx, plan)
        if not os.path.isdir(top):
            raise ToolError(f"{display_path(ctx, top)} is not a directory; glob searches "
                            "directories (use path for the directory, pattern for names).")
        matches = _matcher(pattern)
        walk = TreeWalk(top, ignorer_for(ctx, top), args["no_ignore"])
        found, limit, more = [], args["max_results"], 0
        for visit in walk:
            if matches(os.path.relpath(visit.path, top)):
                if len(found) < limit:
                    found.append(display_path(ctx, visit.path) + "/" * visit.is_dir)
                else:
                    more += 1
        lines = found or [f"No paths match {pattern} in {display_path(ctx, top)}."]
        if more:
            lines.append(f"[{more} more matches not shown; narrow the pattern or raise "
                         "max_results.]")
        return ToolResult("\n".join(lines + walk_notes(walk)), locations=[{"path": top}])


def _matcher(pattern):
    try:
        return path_matcher(pattern)
    except PatternError as exc:
        raise ToolError(str(exc)) from None


def walk_notes(walk, changed=0):
    """What a walk left out, as notes for the model."""
    notes = []
    if walk.sensitive:
        notes.append(f"[skipped {walk.sensitive} credential or shell start-up files (e.g. "
                     "~/.ssh, .env, ~/.bashrc); read_file asks the user for them.]")
    if walk.changed + changed:
        notes.append(f"[skipped {walk.changed + changed} entries that changed while being "
                     "opened (e.g. a directory swapped for a symlink).]")
    if walk.deep:
        notes.append(f"[skipped {walk.deep} directories nested too deep; search below them "
                     "with path.]")
    if walk.truncated:
        notes.append(f"[search stopped after {MAX_WALK} entries; use a narrower path.]")
    if walk.expired:
        notes.append(f"[search stopped after {walk.pacer.budget:.0f} s; use a narrower path "
                     "or pattern.]")
    return notes


class GrepParams(Schema):
    pattern = fields.String(required=True, validate=validate.Length(min=1), metadata={
        "description": "Regular expression in RE2 syntax (Python re without backreferences "
                       "or lookaround; a match never spans lines), or plain text with "
                       "fixed_strings."})
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

    def run(self, args, ctx, plan=None):
        try:
            regex = compile_grep(args["pattern"], args["fixed_strings"], args["ignore_case"])
        except PatternError as exc:
            raise ToolError(str(exc)) from None
        top = self._top(args, ctx, plan)
        pacer, state = Pacer(), {"binary": 0, "big": 0, "changed": 0}
        walk = None
        if os.path.isdir(top):
            walk = self._walk(args, ctx, top, pacer)
            reads = self._files(args, walk, top, state)
        else:  # one file: opened (and checked) once
            read = read_regular_fd(lambda: open_checked(top, FILE_FLAGS), state)
            if read is None:
                raise ToolError(f"{display_path(ctx, top)} is not a regular file; grep "
                                "searches regular files and directories.")
            reads = [(top, read)]
        hits = []
        try:
            for path, read in reads:
                data = _searchable(read, state)
                for lineno, line in matching_lines(regex, data, MAX_MATCHES + 1 - len(hits),
                                                   pacer):
                    hits.append(f"{display_path(ctx, path)}:{lineno}: {_cut(line)}")
                if len(hits) > MAX_MATCHES or not pacer.tick():
                    break
        finally:
            if walk is not None:
                reads.close()  # the walk's directory fds, now (also on cancel)
        return ToolResult(self._report(args, ctx, top, hits, state, walk, pacer),
                          locations=[{"path": top}])

    def _walk(self, args, ctx, top, pacer):
        prune = None
        if args["exclude"]:
            exclude = _matcher(args["exclude"])
            prune = lambda path, is_dir: exclude(os.path.relpath(path, top))  # noqa: E731
        return TreeWalk(top, ignorer_for(ctx, top), args["no_ignore"], prune, pacer)

    def _files(self, args, walk, top, state):
        """``(path, read_regular_fd result)`` of each file to search, read as it comes."""
        include = _matcher(args["include"]) if args["include"] else None
        for visit in walk:
            if not visit.is_file:
                continue
            if include is None or include(os.path.relpath(visit.path, top)):
                yield visit.path, read_regular_fd(visit.open, state)

    def _report(self, args, ctx, top, hits, state, walk, pacer):
        shown = display_path(ctx, top)
        lines = hits[:MAX_MATCHES] or [f"No matches for {args['pattern']} in {shown}."]
        if len(hits) > MAX_MATCHES:
            lines.append(f"[showing the first {MAX_MATCHES} matches; narrow the search with "
                         "path, include or a more specific pattern.]")
        if state["binary"] or state["big"]:
            lines.append(f"[skipped {state['binary']} binary files and {state['big']} files "
                         f"over {MAX_GREP_BYTES // 2**20} MiB.]")
        if walk is not None:
            lines += walk_notes(walk, state["changed"])
        elif pacer.expired:
            lines.append(f"[search stopped after {pacer.budget:.0f} s.]")
        return "\n".join(lines)


def read_regular_fd(opener, state, limit=MAX_GREP_BYTES):
    """``(data, size)`` of the regular file ``opener()`` opens (data None above ``limit``);
    None for anything else, or when it changed while being opened (counted)."""
    try:
        fd = opener()
    except OSError:
        state["changed"] += 1
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        return (fh.read(limit) if st.st_size <= limit else None), st.st_size


def _searchable(read, state):
    """UTF-8 bytes of a file worth searching (bad bytes as U+FFFD), else b"": ``read`` is
    what :func:`read_regular_fd` returned for it."""
    if read is None:
        return b""
    if read[0] is None:
        state["big"] += 1
        return b""
    if b"\0" in read[0][:SNIFF]:
        state["binary"] += 1
        return b""
    try:
        read[0].decode("utf-8")
        return read[0]
    except UnicodeDecodeError:
        return read[0].decode("utf-8", errors="replace").encode("utf-8")


def matching_lines(regex, data, limit, pacer):
    """``(line number, line text)`` for each line of ``data`` with a match, at most ``limit``.

    Each RE2 call searches a bounded slice (see WORK) of whole lines (a match never spans
    lines), or a window of a line longer than that; the pacer yields between calls.
    """
    step = max(MIN_SLICE, min(MAX_SLICE, WORK // max(1, regex.programsize)))
    lineno, counted, pos, size = 1, 0, 0, len(data)
    while pos < size and limit > 0 and pacer.tick():
        end = size if pos + step >= size else data.rfind(b"\n", pos, pos + step)
        if end == -1:  # the line at pos is longer than a slice
            end = data.find(b"\n", pos)
            start = _search_long(regex, data, pos, size if end == -1 else end, step, pacer)
        else:
            match = regex.search(data, pos, end)
            start = None if match is None else match.start()
        if start is None:
            pos = end + 1 if end != -1 else size
            continue
        lineno += data.count(b"\n", counted, start)
        counted = start
        first, last = data.rfind(b"\n", 0, start) + 1, data.find(b"\n", start)
        last = size if last == -1 else last
        yield lineno, data[first:last].decode("utf-8").rstrip("\r")
        limit -= 1
        pos = last + 1


def _search_long(regex, data, pos, end, step, pacer):
    """Where the first match in the long line ``data[pos:end]`` starts, or None.

    Windows of ``step`` bytes overlap by a quarter, so a match up to ``step // 4`` bytes
    long is always found; a longer match that straddles two windows can be missed.
    Anchors and word boundaries still see the whole line.
    """
    advance = step - step // 4
    while pos < end and pacer.tick():
        match = regex.search(data, pos, min(end, pos + step))
        if match is not None:
            return match.start()
        if pos + step >= end:
            return None
        pos += advance
    return None


def _cut(line):
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + "…"
