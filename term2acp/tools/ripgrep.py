"""grep's scans in ripgrep, run in the shell's sandbox, with the walker's rules.

Which ``rg``: the one the ``ripgrep`` wheel puts beside this Python (pinned in setup.cfg:
its newest releases are source packages that need Rust), else an ``rg`` on PATH; the log
says once which, and that the built-in walker (:mod:`term2acp.tools.tree`) searches when
there is none, when the sandbox is unavailable, or when a call is one ripgrep cannot
answer the walker's way (below).

Why in the sandbox: the model chooses the pattern and the path, and ripgrep reads by path,
so a directory swapped for a symlink while it walks would be entered. Inside the sandbox
(``sandbox.run``, the view shell commands get, network off) whatever it enters is what a
shell command could read anyway: never the rest of the home, other projects or the
credential files the view masks. The arguments are ours: the pattern after ``-e``, the
path after ``--``, no configuration file (``--no-config``), never ``--follow``, ``--pre``
or ``--search-zip``, and the only ignore file named is the root's own ``.gitignore``.

The walker's rules, as flags: ``.gitignore`` files only (``--no-require-git``, no global,
``.git/info/exclude``, ``.ignore`` or parent files; the root's own file is named when the
search starts below it, and a search below a directory with its own ``.gitignore`` that
ripgrep would not see goes to the walker), hidden files searched, ``.git`` and dotenv
files (``core.sensitive.NAME_GLOBS``) skipped, files over ``MAX_GREP_BYTES`` skipped,
symlinks never followed, output in path order (``--sort path``). include, exclude and
type are applied again here with the walker's matcher, so they mean what they mean
there. What ripgrep skipped (binary files, big files, dotenv files) is counted from its
``--debug`` log, which goes to a temporary file, not into the output; not when a type or
name glob narrows the scan (that log would name every file left out, a line each): then
the note about skipped files is missing.
Search tops that contain the home directory (its credential files) or lie outside the
session root (not in the sandbox's view) go to the walker.
"""

import logging
import os
import re
import shutil
import stat
import sysconfig
import tempfile

from term2acp.core.sensitive import NAME_GLOBS, home_dir, is_sensitive
from term2acp.core.workspace import is_within
from term2acp.tools.grepping import MAX_GREP_BYTES, cut
from term2acp.tools import tree

log = logging.getLogger(__name__)

_BINARY = re.compile(rb"ignoring (.*): found binary data at offset \d+$", re.M)
_BIG = re.compile(rb"ignoring (.*): \d+ bytes$", re.M)
_DOTENV = re.compile(rb"ignoring .*Override\(Glob\(Matched\(Glob \{ from: None, original: "
                     rb"\"!\.env", re.M)
_chosen = []


class Unanswerable(Exception):
    """ripgrep cannot answer this call the walker's way; the walker does."""


class _Enough(Exception):
    """Enough entries are in: the search is stopped."""


def binary():
    """The ``rg`` to run, or None; looked up (and logged) once."""
    if not _chosen:
        wheel = os.path.join(sysconfig.get_path("scripts"), "rg")
        system = shutil.which("rg")
        found = next((os.path.realpath(p) for p in (wheel, system)
                      if p and os.access(p, os.X_OK) and "/shims/" not in p), None)
        _chosen.append(found)
        if found:
            log.info("grep searches with ripgrep %s in the sandbox (the built-in walker when "
                     "the sandbox is unavailable)", found)
        else:
            log.info("grep: no ripgrep found (pip install ripgrep==14.1.0, or rg on PATH): "
                     "the built-in walker searches")
    return _chosen[0]


def usable(ctx, top, no_ignore):
    """True when ripgrep can search ``top`` (a directory) with the walker's rules."""
    from term2acp import sandbox

    root = ctx.root
    if binary() is None or not is_within(root, top) or not sandbox.probe().available:
        return False
    home = home_dir()
    if is_within(top, home) or is_sensitive(top, home):
        return False
    if no_ignore or top == root:
        return True
    below = os.path.relpath(os.path.dirname(top), root)
    directory = root
    for part in below.split(os.sep) if below != "." else []:
        directory = os.path.join(directory, part)
        if os.path.lexists(os.path.join(directory, ".gitignore")):
            return False  # rules ripgrep would not read from there
    return _plain_file(os.path.join(root, ".gitignore")) is not False


def _plain_file(path):
    """True: a regular file ripgrep may read as the root's rules; None: none; False: odd."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size <= tree.MAX_IGNORE_BYTES or False


def argv(args, regex_pattern, mode, ctx, top):
    """The rg command line for one grep call."""
    command = [binary(), "--no-config", "--no-require-git", "--no-ignore-global",
               "--no-ignore-parent", "--no-ignore-dot", "--no-ignore-exclude", "--hidden",
               "--sort", "path", "--max-filesize", str(MAX_GREP_BYTES), "--no-messages",
               "--color", "never", "--null", "--no-heading", "--with-filename",
               "--max-columns", "1300", "--max-columns-preview", "-g", "!.git"]
    if not is_sensitive(top, home_dir()):
        for glob in NAME_GLOBS:
            command += ["-g", "!" + glob]
    if args["no_ignore"]:
        command.append("--no-ignore")
    elif top != ctx.root and _plain_file(os.path.join(ctx.root, ".gitignore")):
        command += ["--ignore-file", os.path.join(ctx.root, ".gitignore")]
    # a name glob narrows the scan as a file type: rg's -g would override the ignore files
    glob = next((g for g in (args.get("type_glob"), args.get("include")) if g and "/" not in g
                 and ":" not in g), None)
    if glob:  # (its --debug log would list every file the type leaves out: seconds)
        command += ["--type-add", "only:" + glob, "-t", "only"]
    else:
        command.append("--debug")
    if args["exclude"] and "/" not in args["exclude"]:
        command += ["-g", "!" + args["exclude"]]
    if args["fixed_strings"]:
        command.append("-F")
    if args["ignore_case"]:
        command.append("-i")
    if args["multiline"]:
        command.append("-U")
    if mode == "files_with_matches":
        command.append("-l")
    elif mode == "count":
        command.append("--count-matches" if args["multiline"] else "--count")
    else:
        command.append("-n")
        before, after = args["before_n"], args["after_n"]
        command += ["-B", str(before), "-A", str(after)] if before or after else []
    return command + ["-e", regex_pattern, "--", top + "/"]


class Scan:
    """One rg run: its output as the walker's entries, stopped once ``wanted`` are in."""

    def __init__(self, search, top, accept):
        self.search, self.top, self.accept = search, top, accept
        self.pending = b""
        self.expired = False

    def run(self, command):
        from term2acp import sandbox

        ctx = self.search.ctx
        with tempfile.TemporaryFile() as log_file:
            fd = log_file.fileno()  # inherited; dash takes one-digit fds only, so by /proc
            os.set_inheritable(fd, True)
            wrapped = ["/bin/sh", "-c", f'exec "$@" 2>/proc/self/fd/{fd}', "rg", *command]
            try:
                exit = sandbox.run(wrapped, ctx.root, ctx.settings, on_output=self._output,
                                   timeout=tree.SEARCH_SECONDS, pass_fds=(fd,),
                                   network=False)
            except _Enough:
                exit = None
            except sandbox.ProcessTimeout:
                exit, self.expired = None, True
            except (sandbox.SandboxUnavailable, sandbox.Refused, OSError) as exc:
                raise Unanswerable(str(exc)) from None
            log_file.seek(0)
            debug = log_file.read()
            if exit is not None:
                if exit.exit_code not in (0, 1):  # 1: no match; 2: an error (pattern, launch)
                    errors = [line for line in debug.splitlines() if b"DEBUG|" not in line]
                    raise Unanswerable(f"rg exited with {exit}: {b' '.join(errors)[-300:]!r}")
                self._line(self.pending)
            self._count(debug)

    def _output(self, data):
        # files_with_matches prints each path and a NUL; the other modes print lines
        sep = b"\0" if self.search.mode == "files_with_matches" else b"\n"
        lines = (self.pending + data).split(sep)
        self.pending = lines.pop()
        for line in lines:
            self._line(line)

    def _line(self, line):
        search = self.search
        if not line:
            return
        if search.mode == "files_with_matches":
            self._add(line, None)
        elif line == b"--":
            if search.entries and search.entries[-1] != "--":
                search.entries.append("--")
        else:
            path, _, rest = line.partition(b"\0")
            self._add(path, rest)

    def _add(self, raw, rest):
        search = self.search
        path = os.fsdecode(raw)
        if path.endswith("/") or not self.accept(path):
            return
        shown = search.shown(path)
        if search.mode == "files_with_matches":
            search.entries.append(shown)
        elif search.mode == "count":
            search.entries.append(f"{shown}: {int(rest)}")
        else:
            number, mark, text = _numbered(rest)
            text = text.decode("utf-8", "replace").rstrip("\r")
            search.entries.append(f"{shown}{mark}{number}{mark} {cut(text)}")
        if len(search.entries) >= search.wanted:
            raise _Enough()

    def _count(self, debug):
        state = self.search.state
        for key, skipped in (("binary", _BINARY), ("big", _BIG)):  # those grep would read
            state[key] += sum(map(self.accept, map(os.fsdecode, skipped.findall(debug))))
        self.search.sensitive += len(_DOTENV.findall(debug))


def _numbered(rest):
    """``(line number, mark, text)`` of ``N:text`` (a match) or ``N-text`` (context)."""
    digits = 0
    while digits < len(rest) and 48 <= rest[digits] <= 57:
        digits += 1
    mark = chr(rest[digits]) if digits < len(rest) else ":"
    return int(rest[:digits] or 0), mark, rest[digits + 1:]
