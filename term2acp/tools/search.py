"""Search tools: glob (find paths) and grep (find text), both honouring .gitignore.

Both walk the tree with :class:`term2acp.tools.tree.TreeWalk`: by directory fds, each
open checked once at the moment it happens, symlinks never followed, ``.git`` skipped,
credential files skipped (counted in a note), ``.gitignore`` rules pruning unless
``no_ignore`` is set. Every pattern is matched by RE2 (:mod:`term2acp.tools.patterns`),
which never backtracks; grep searches a file in bounded slices
(:mod:`term2acp.tools.grepping`) and the walk's :class:`~term2acp.tools.tree.Pacer`
yields to the hub between them and bounds the whole search in time.

A directory is searched by ripgrep in the sandbox when it can answer the walker's way
(:mod:`term2acp.tools.ripgrep`: which calls, the flags that give the same rules), else by
the walker; a single file always by the engine here.
"""

import logging
import os

from marshmallow import Schema, fields, validate

from term2acp.tools import ripgrep
from term2acp.tools.base import Tool, ToolError, ToolResult
from term2acp.tools.filetypes import TYPES, UnknownType, glob_for
from term2acp.tools.grepping import (MAX_GREP_BYTES, content_lines, line_numbers,
                                     matching_lines, matching_spans, read_regular_fd,
                                     searchable)
from term2acp.tools.paths import (FILE_FLAGS, display_path, located, open_checked, read_plan,
                                  readable_path)
from term2acp.tools.patterns import (PatternError, compile_grep, name_glob, name_test,
                                     path_matcher)
from term2acp.tools import tree
from term2acp.tools.tree import MAX_WALK, Pacer, TreeWalk, ignorer_for

log = logging.getLogger(__name__)

MAX_MATCHES = 200  # grep output lines by default (content mode)
MAX_FILES = 500  # grep files listed by default (files_with_matches, count)
MAX_HEAD = 2000  # the largest head_limit
MAX_CONTEXT = 20  # context lines on each side
HEAD_START = 0.05  # seconds the walker searches before ripgrep takes a long scan over


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
    sort = fields.String(load_default="path", validate=validate.OneOf(("path", "newest")),
                         metadata={"description": "path (default) or newest: most recently "
                                                  "modified first."})
    no_ignore = fields.Boolean(load_default=False, metadata={
        "description": "Also search files excluded by .gitignore."})


class GlobTool(_SearchTool):
    name = "glob"
    kind = "search"  # reads names only; no side effect
    Params = GlobParams
    description = (
        "Find files and directories by glob pattern, sorted by path or, with sort=newest, "
        "most recently modified first; directories end in /. Skips .git and files excluded "
        "by .gitignore unless no_ignore is true. Symlinks are listed but not followed.")

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
        newest, cut_at = args["sort"] == "newest", len(top.rstrip("/")) + 1
        by_name = name_glob(pattern)  # asked before the rules: a string test where it can
        named = by_name and (name_test(by_name) or _matcher(by_name))
        walk = TreeWalk(top, ignorer_for(ctx, top), args["no_ignore"], wanted=(
            (lambda name, path: named(name)) if named else lambda name, path: matches(path[cut_at:])))
        found, limit, total = [], args["max_results"], 0
        for visit in walk:
            if visit.is_dir and not matches(visit.path[cut_at:]):
                continue  # (anything else was wanted)
            total += 1
            if newest:  # every match competes: keep its time, sort once at the end
                found.append((-_mtime(visit), visit.path, visit.is_dir))
            elif len(found) < limit:
                found.append((0, visit.path, visit.is_dir))
        if newest:
            found.sort()
        lines = [display_path(ctx, path) + "/" * is_dir for _, path, is_dir in found[:limit]]
        lines = lines or [f"No paths match {pattern} in {display_path(ctx, top)}."]
        if total > limit:
            lines.append(f"[{total - limit} more matches not shown; narrow the pattern or "
                         "raise max_results.]")
        return ToolResult("\n".join(lines + walk_notes(walk)), locations=[{"path": top}])


def _mtime(visit):
    try:
        return os.stat(os.path.basename(visit.path), dir_fd=visit.dir_fd,
                       follow_symlinks=False).st_mtime_ns
    except OSError:
        return 0


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


MODES = ("content", "files_with_matches", "count")


class GrepParams(Schema):
    pattern = fields.String(required=True, validate=validate.Length(min=1), metadata={
        "description": "Regular expression in RE2 syntax (Python re without backreferences "
                       "or lookaround), or plain text with fixed_strings. A match stays on "
                       "one line unless multiline is true."})
    path = fields.String(load_default=".", metadata={
        "description": "File or directory to search. Default: the workspace root."})
    output_mode = fields.String(load_default="content", validate=validate.OneOf(MODES),
                                metadata={"description": (
                                    "content (default): matching lines as path:line: text; "
                                    "files_with_matches: only the paths; count: path: "
                                    "number of matches.")})
    context = fields.Integer(load_default=0, validate=validate.Range(min=0, max=MAX_CONTEXT),
                             metadata={"description": "Lines of context before and after "
                                                      "each match (content mode), like rg -C."})
    before = fields.Integer(load_default=None, validate=validate.Range(min=0, max=MAX_CONTEXT),
                            metadata={"description": "Lines before each match (rg -B); "
                                                     "overrides context."})
    after = fields.Integer(load_default=None, validate=validate.Range(min=0, max=MAX_CONTEXT),
                           metadata={"description": "Lines after each match (rg -A); "
                                                    "overrides context."})
    multiline = fields.Boolean(load_default=False, metadata={
        "description": "Let a match span lines (\\n, \\s, [^x] match newlines; . does "
                       "only with (?s)), like rg -U."})
    fixed_strings = fields.Boolean(load_default=False, metadata={
        "description": "Treat pattern as plain text, not a regular expression."})
    ignore_case = fields.Boolean(load_default=False, metadata={
        "description": "Match case-insensitively."})
    type = fields.String(load_default=None, metadata={
        "description": "Only files of this language, as rg -t: " + ", ".join(sorted(TYPES))
                       + "."})
    include = fields.String(load_default=None, metadata={
        "description": "Only search files matching this glob, e.g. *.py or *.{ts,tsx}."})
    exclude = fields.String(load_default=None, metadata={
        "description": "Skip files and directories matching this glob, e.g. tests or *.min.js."})
    head_limit = fields.Integer(load_default=None, validate=validate.Range(min=1, max=MAX_HEAD),
                                metadata={"description": (
                                    f"Most output entries (lines in content mode, files "
                                    f"otherwise). Default: {MAX_MATCHES} lines, "
                                    f"{MAX_FILES} files.")})
    offset = fields.Integer(load_default=0, validate=validate.Range(min=0), metadata={
        "description": "Skip this many output entries first (to page through results)."})
    no_ignore = fields.Boolean(load_default=False, metadata={
        "description": "Also search files excluded by .gitignore."})


class GrepTool(_SearchTool):
    name = "grep"
    kind = "search"  # reads files only; no side effect
    Params = GrepParams
    description = (
        "Search file contents (ripgrep-like, RE2 regular expressions). output_mode content "
        "prints path:line: text (context lines as path-line- text, groups split by --), "
        "files_with_matches the paths, count the matches per file; page with head_limit and "
        "offset. Filter files with type, include, exclude. Skips .git, files excluded by "
        f".gitignore (unless no_ignore), binary files, files over "
        f"{MAX_GREP_BYTES // 2**20} MiB and symlinks.")

    def title(self, args):
        where = f" in {args['path']}" if args.get("path") not in (None, ".") else ""
        return f"Grep {args.get('pattern')}{where}"

    def run(self, args, ctx, plan=None):
        try:
            regex = compile_grep(args["pattern"], args["fixed_strings"], args["ignore_case"],
                                 args["multiline"])
        except PatternError as exc:
            raise ToolError(str(exc)) from None
        top = self._top(args, ctx, plan)
        scan = os.path.isdir(top) and ripgrep.usable(ctx, top, args["no_ignore"])
        if scan:  # the walker first: most searches end early; a long scan goes to ripgrep
            head = _Search(args, ctx, regex, min(HEAD_START, tree.SEARCH_SECONDS))
            result = self._search(args, ctx, top, head)
            if result is not None:
                return result
            try:
                return self._ripgrep(args, ctx, top, _Search(args, ctx, regex))
            except ripgrep.Unanswerable as exc:
                log.debug("grep by the walker: %s", exc)
        return self._search(args, ctx, top, _Search(args, ctx, regex))

    def _search(self, args, ctx, top, search):
        """The walker's (or one file's) answer; None when a head start ran out."""
        walk = None
        if os.path.isdir(top):
            walk = self._walk(args, top, ctx, search.pacer)
            reads = self._files(args, walk, top, search.state)
        else:  # one file: opened (and checked) once
            read = read_regular_fd(lambda: open_checked(top, FILE_FLAGS), search.state)
            if read is None:
                raise ToolError(f"{display_path(ctx, top)} is not a regular file; grep "
                                "searches regular files and directories.")
            reads = [(top, read)]
        try:
            for path, read in reads:
                if not search.add(path, read) or not search.pacer.tick():
                    break
        finally:
            if walk is not None:
                reads.close()  # the walk's directory fds, now (also on cancel)
        if search.pacer.expired and search.pacer.budget < tree.SEARCH_SECONDS:
            return None  # the head start ran out
        return ToolResult(search.report(top, walk), locations=[{"path": top}])

    def _ripgrep(self, args, ctx, top, search):
        type_glob = None
        if args["type"]:
            try:
                type_glob = glob_for(args["type"])
            except UnknownType as exc:
                raise ToolError(str(exc)) from None
        options = dict(args, type_glob=type_glob, before_n=search.before, after_n=search.after)
        command = ripgrep.argv(options, args["pattern"], search.mode, ctx, top)
        scan = ripgrep.Scan(search, top, _accepts(args, top, type_glob))
        scan.run(command)
        if search.entries and search.entries[-1] == "--":
            search.entries.pop()
        return ToolResult(search.report(top, _Skipped(search, scan.expired)),
                          locations=[{"path": top}])

    def _walk(self, args, top, ctx, pacer):
        prune = None
        cut_at = len(top.rstrip("/")) + 1
        if args["exclude"]:
            exclude = _matcher(args["exclude"])
            prune = lambda path, is_dir: exclude(path[cut_at:])  # noqa: E731
        return TreeWalk(top, ignorer_for(ctx, top), args["no_ignore"], prune, pacer)

    def _files(self, args, walk, top, state):
        """``(path, read_regular_fd result)`` of each file to search, read as it comes."""
        filters = [_matcher(args["include"])] if args["include"] else []
        if args["type"]:
            try:
                filters.append(_matcher(glob_for(args["type"])))
            except UnknownType as exc:
                raise ToolError(str(exc)) from None
        cut_at = len(top.rstrip("/")) + 1
        for visit in walk:
            if not visit.is_file:
                continue
            rel = visit.path[cut_at:]
            if all(accept(rel) for accept in filters):
                yield visit.path, read_regular_fd(visit.open, state)


def _accepts(args, top, type_glob):
    """The walker's include, type and exclude decisions for a path ripgrep found."""
    filters = [_matcher(glob) for glob in (args["include"], type_glob) if glob]
    exclude = _matcher(args["exclude"]) if args["exclude"] else None
    cut_at = len(top.rstrip("/")) + 1

    def accept(path):
        rel = path[cut_at:]
        if not all(accepts(rel) for accepts in filters):
            return False
        if exclude is None:
            return True
        parts = rel.split("/")
        return not any(exclude("/".join(parts[:n])) for n in range(1, len(parts) + 1))
    return accept


class _Skipped:
    """What a ripgrep scan skipped, as walk_notes reads a walk."""

    changed = deep = 0
    truncated = False

    def __init__(self, search, expired):
        self.sensitive, self.expired, self.pacer = search.sensitive, expired, search.pacer


class _Search:
    """One grep call's hits, paged by offset and head_limit, and what it skipped."""

    def __init__(self, args, ctx, regex, budget=None):
        self.args, self.ctx, self.regex = args, ctx, regex
        self.mode = args["output_mode"]
        default = MAX_MATCHES if self.mode == "content" else MAX_FILES
        self.limit = args["head_limit"] or default
        self.wanted = args["offset"] + self.limit + 1  # one more says "there is more"
        context = args["context"]
        self.before = context if args["before"] is None else args["before"]
        self.after = context if args["after"] is None else args["after"]
        self.entries = []
        self.pacer = Pacer(budget)
        self.state = {"binary": 0, "big": 0, "changed": 0}
        self.sensitive = 0  # dotenv files ripgrep skipped

    def shown(self, path):
        return display_path(self.ctx, path)

    def add(self, path, read):
        """Search one file; False once enough entries are in."""
        data = searchable(read, self.state)
        if not data:
            return True
        find = matching_spans if self.args["multiline"] else matching_lines
        room = self.wanted - len(self.entries) if self.mode == "content" else 1 << 30
        if self.mode == "files_with_matches":
            room = 1
        spans = list(find(self.regex, data, room, self.pacer))
        if not spans:
            return True
        shown = display_path(self.ctx, path)
        if self.mode == "files_with_matches":
            self.entries.append(shown)
        elif self.mode == "count":
            self.entries.append(f"{shown}: {len(spans)}")
        else:
            ranges = list(line_numbers(data, spans, self.pacer))
            self.entries += content_lines(shown, data, ranges, self.before, self.after)
            if self.before or self.after:
                self.entries.append("--")  # between files, as between groups
        return len(self.entries) < self.wanted

    def report(self, top, walk):
        entries = self.entries
        if entries and entries[-1] == "--":
            entries.pop()
        offset = self.args["offset"]
        lines = entries[offset:offset + self.limit]
        shown = display_path(self.ctx, top)
        if not lines:
            lines = [f"No matches for {self.args['pattern']} in {shown}."
                     if not entries else f"No results after offset {offset} ({len(entries)} "
                     "in all)."]
        if len(entries) > offset + self.limit:
            unit = "lines" if self.mode == "content" else "files"
            lines.append(f"[showing {unit} {offset + 1}-{offset + self.limit}; more follow: "
                         f"call again with offset={offset + self.limit}, or narrow the "
                         "search with path, type, include or a more specific pattern.]")
        state = self.state
        if state["binary"] or state["big"]:
            lines.append(f"[skipped {state['binary']} binary files and {state['big']} files "
                         f"over {MAX_GREP_BYTES // 2**20} MiB.]")
        if walk is not None:
            lines += walk_notes(walk, state["changed"])
        elif self.pacer.expired:
            lines.append(f"[search stopped after {self.pacer.budget:.0f} s.]")
        return "\n".join(lines)
