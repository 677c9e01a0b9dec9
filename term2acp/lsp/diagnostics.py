"""The new errors a write brings: appended to the tool result for the model and shown as a
text block of the tool call beside its diff, on v1 and v2.

``turns/calls.py`` puts a :class:`Watch` on every tool call's context; the shared write
paths call ``ToolContext.before_write`` for each file (``edit_file``, ``create_file``,
each file of ``apply_patch``, writes through the v1 editor's ``fs/write_text_file``), which
records the file's text as it was. After a call that succeeded, each file of a language
with a server is given to it as it was (unless the server already has that text and its
diagnostics) and as it is now, and the errors of the second answer that the first did not
have are reported (compared by severity, message, source and code, not by line: an error
that only moved is not new), at most ``MAX_PER_FILE`` per file and ``MAX_TEXT`` in all,
the rest counted. Warnings only with ``[lsp] warnings``. The whole wait, a server's start
included, is bounded by ``[lsp] diagnostics_timeout``; no server: nothing; a slow, broken
or disabled one: one short line. A write never fails for this.
"""

import collections
import logging
import time

from term2acp.lsp import files, servers

log = logging.getLogger(__name__)

MAX_PER_FILE = 20
MAX_TEXT = 4000
SEVERITIES = {1: "error", 2: "warning", 3: "information", 4: "hint"}


class Watch:
    """The files one tool call writes, with their text before the write."""

    def __init__(self, settings):
        self.settings, self.before = settings, {}
        # what the call's context calls before each write (None: no language servers)
        self.note = self._note if settings.lsp.enabled else None

    def _note(self, real):
        if real not in self.before and servers.wanted(real, self.settings):
            self.before[real] = files.read_text(real)

    def report(self, result, ctx):
        """``result`` with the new problems of the files the call ``ctx`` wrote (a failed
        call: as is)."""
        if getattr(result, "is_error", True) or not self.before:
            return result
        try:
            text = collect(ctx, self.before)
        except Exception:  # noqa: BLE001 - the write stands whatever the server did
            log.exception("lsp: diagnostics after a write failed")
            text = ""
        if text:
            result.text = f"{result.text}\n\n{text}"
            if result.content:
                result.content = [*result.content, {"type": "text", "text": text}]
        return result


def collect(ctx, before):
    """The report for the files of ``before`` (path -> text before the write)."""
    from term2acp.lsp import registry
    from term2acp.lsp.connection import ServerGone, TimedOut

    lsp = ctx.settings.lsp
    if ctx.language_servers is None:  # a context without the session's servers
        return ""
    group = ctx.language_servers.of(ctx.root, ctx.settings)
    deadline = time.monotonic() + lsp.diagnostics_timeout
    wanted = {1, 2} if lsp.warnings else {1}
    found, notes = [], []
    for real, old in before.items():
        new = files.read_text(real)
        if new is None:
            continue  # removed (or no longer text): nothing to diagnose
        for attempt in (1, 2):  # a server found gone meanwhile is started again once
            try:
                conn = group.connection(real, deadline)
                problems = new_problems(conn, real, old, new, deadline, wanted)
                break
            except registry.NoServer:
                problems = []
                break
            except registry.Waiting as exc:
                problems = f"{exc}; no diagnostics within {lsp.diagnostics_timeout:g} s"
                break
            except registry.Off as exc:
                problems = str(exc)
                if attempt == 2 or "started again" not in problems:
                    break
            except (ServerGone, TimedOut) as exc:
                problems = f"{conn.name}: {files.one_line(exc, 200)}"
                if isinstance(exc, TimedOut):
                    break
        if isinstance(problems, str):
            notes.append(problems)
            continue
        if problems is None:
            notes.append(f"{conn.name} gave no diagnostics within {lsp.diagnostics_timeout:g} s")
        elif problems:
            found.append((conn.name, real, new, problems))
    return render(ctx.root, found, list(dict.fromkeys(notes)))


def new_problems(conn, real, old, new, deadline, wanted):
    """The diagnostics of ``new`` (severity in ``wanted``) that ``old`` did not have;
    None when the server did not answer by ``deadline``."""
    before = []
    if old is not None:
        doc, got = conn.docs.get(files_uri(real)), conn.published.get(files_uri(real))
        if doc is not None and doc[1] == old and got is not None and (got[1] is None or got[1] >= doc[0]):
            before = got[3]
        else:
            before = conn.diagnostics(*conn.sync(real, old), deadline)
            if before is None:
                return None
    after = conn.diagnostics(*conn.sync(real, new), deadline)
    if after is None:
        return None
    return fresh([d for d in before if _severity(d) in wanted], old or "",
                 [d for d in after if _severity(d) in wanted], new)


def fresh(before, old, after, new):
    """The problems of ``after`` that ``before`` did not have: first matched with the same
    problem on a line of the same text (it moved with its line), then with the same problem
    anywhere (its line changed)."""
    old_lines, new_lines = files.lines_of(old), files.lines_of(new)

    def text(item, lines):
        return files.line_at(lines, item["range"]["start"]["line"]).strip()
    left = sorted(after, key=lambda d: (d["range"]["start"]["line"], d["range"]["start"]["character"]))
    for keyed in (lambda d, lines: (_key(d), text(d, lines)), lambda d, lines: _key(d)):
        seen = collections.Counter(keyed(d, old_lines) for d in before)
        kept = []
        for item in left:
            key = keyed(item, new_lines)
            if seen[key] > 0:
                seen[key] -= 1
            else:
                kept.append(item)
        matched = collections.Counter(keyed(d, new_lines) for d in left) - \
            collections.Counter(keyed(d, new_lines) for d in kept)
        before = [d for d in before if not _take(matched, keyed(d, old_lines))]
        left = kept
    return left


def _take(counter, key):
    if counter[key] > 0:
        counter[key] -= 1
        return True
    return False


def files_uri(real):
    from term2acp.lsp.connection import uri_of

    return uri_of(real)


def _severity(item):
    severity = item.get("severity")
    return severity if severity in SEVERITIES else 1


def _key(item):
    return (_severity(item), item["message"], str(item.get("source")), str(item.get("code")))


def render(root, found, notes):
    """The text for the model and the editor: a header, one line a problem, bounded."""
    out, size, headed = [], 0, set()
    for name, real, text, problems in found:
        lines, path = files.lines_of(text), files.shown(root, real)
        if name not in headed:
            headed.add(name)
            out.append(f"New problems reported by {name} after this change:")
        shown = 0
        for item in problems:
            if shown >= MAX_PER_FILE or size >= MAX_TEXT:
                break
            start = item["range"]["start"]
            column = files.to_column(files.line_at(lines, start["line"]), start["character"])
            source = f" ({files.one_line(item['source'], 40)})" if item.get("source") else ""
            line = (f"{path}:{start['line'] + 1}:{column}: {SEVERITIES[_severity(item)]}: "
                    f"{files.one_line(item['message'])}{source}")
            out.append(line)
            size += len(line) + 1
            shown += 1
        if shown < len(problems):
            rest = len(problems) - shown
            kinds = "errors" if all(_severity(p) == 1 for p in problems) else "problems"
            out.append(f"... and {rest} more {kinds} in {path}")
    out += [f"[diagnostics: {note}]" for note in notes]
    return "\n".join(out)
