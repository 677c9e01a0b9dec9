"""The code tool's questions to a language server: definition, references, hover, the
symbols of a file and a symbol search over the workspace, located by a path with a 1-based
line and column, or by a symbol's name alone.

Answers are lines ``path:line:column: source line`` (paths relative to the root when inside
it), at most ``MAX_RESULTS``, the rest counted; a hover adds its text, bounded. A server
without ``workspace/symbol`` (pylsp has none) is searched through the document symbols of
the root's files of its language (at most ``MAX_SCAN`` files). Every question, a server's
start included, is bounded by ``[lsp] request_timeout``.
"""

import os
import time

import gevent
import gevent.pool

from term2acp.lsp import files, registry, servers

MAX_RESULTS = 50
MAX_HOVER = 3000
MAX_SCAN = 200  # files whose symbols stand in for a missing workspace/symbol
MAX_WALK = 20000  # entries looked at while finding them
MAX_BY_NAME = 5  # symbols of one name a by-name question follows
SKIP_DIRS = frozenset({"node_modules", "__pycache__", "venv", "build", "dist", "target",
                       "site-packages", "vendor"})
SYMBOL_KINDS = {5: "class", 6: "method", 9: "constructor", 10: "enum", 11: "interface",
                12: "function", 13: "variable", 14: "constant", 23: "struct", 2: "module",
                7: "property", 8: "field", 26: "type parameter", 22: "enum member"}


class Failed(Exception):
    """The question cannot be answered; the message is for the model."""


class Ask:
    """One code tool call: the session's servers, the deadline, the files it read."""

    def __init__(self, group, root, settings, readable=None):
        self.group, self.root, self.settings = group, root, settings
        self.readable = readable or (lambda path: False)  # a file outside the root we may show
        self.deadline = time.monotonic() + settings.lsp.request_timeout
        self.texts = {}

    # ------------------------------------------------------------ plumbing
    def remaining(self):
        return max(0.001, self.deadline - time.monotonic())

    def server(self, path):
        try:
            return self.group.connection(path, self.deadline)
        except (registry.NoServer, registry.Off) as exc:
            raise Failed(str(exc)) from None
        except registry.Waiting as exc:
            raise Failed(f"{exc} after {self.settings.lsp.request_timeout:g} s; try again "
                         "shortly") from None

    def text(self, path):
        """The text of ``path`` (None: unreadable, or outside the root and not readable)."""
        if path not in self.texts:
            inside = path.startswith(self.root.rstrip(os.sep) + os.sep)
            self.texts[path] = files.read_text(path) if inside or self.readable(path) else None
        return self.texts[path]

    def opened(self, conn, path):
        text = self.text(path)
        if text is None:
            raise Failed(f"{files.shown(self.root, path)} is not a readable UTF-8 text file")
        uri, _version, _seq = conn.sync(path, text)
        return uri

    def call(self, conn, method, params):
        from term2acp.lsp.connection import ServerGone, TimedOut

        try:
            return conn.request(method, params, self.remaining())
        except (ServerGone, TimedOut) as exc:
            raise Failed(files.one_line(exc, 400)) from None
        except Exception as exc:  # noqa: BLE001 - the server's error answer
            raise Failed(f"{conn.name} answered {method} with an error: "
                         f"{files.one_line(exc, 300)}") from None

    def position(self, path, line, column):
        lines = files.lines_of(self.text(path) or "")
        return {"line": line - 1, "character": files.to_units(files.line_at(lines, line - 1), column)}

    # ------------------------------------------------------------ answers
    def at(self, operation, path, line, column):
        """definition, references or hover at a position: its lines."""
        conn = self.server(path)
        params = {"textDocument": {"uri": self.opened(conn, path)},
                  "position": self.position(path, line, column)}
        if operation == "hover":
            found = self.call(conn, "textDocument/hover", params)
            head = self.where(path, line - 1, None, column)
            return [head, hover_text(found) or "(no hover information here)"]
        if operation == "references":
            params["context"] = {"includeDeclaration": True}
        method = "textDocument/references" if operation == "references" else "textDocument/definition"
        return self.locations(self.call(conn, method, params))

    def document_symbols(self, path):
        conn = self.server(path)
        found = self.call(conn, "textDocument/documentSymbol",
                          {"textDocument": {"uri": self.opened(conn, path)}})
        return [(name, kind, path, line, units) for name, kind, line, units in flatten(found)]

    def workspace_symbols(self, query, path=None):
        """``(name, kind, path, line, units)`` of the symbols matching ``query``."""
        out, problems, pairs = [], [], self.servers_for(path)
        if not pairs:
            raise Failed("no language server runs for the files of this workspace "
                         f"(looked for: {', '.join(servers.known_names(self.settings))})")
        for conn, sample in pairs:
            try:
                if conn.capabilities.get("workspaceSymbolProvider"):
                    self.opened(conn, sample)  # a server may know no project before
                    found = self.call(conn, "workspace/symbol", {"query": query})
                    out += [s for s in map(_information, found or ()) if s is not None]
                else:
                    out += self.scan(conn, query)
            except Failed as exc:
                problems.append(str(exc))
        if problems and not out:
            raise Failed("; ".join(problems))
        wanted = query.lower()
        out.sort(key=lambda s: (s[0] != query, s[0].lower() != wanted, s[2], s[3]))
        return out

    def servers_for(self, path):
        """``(server, a file of its language)`` for ``path``, or for each language of the
        root's files."""
        if path is not None:
            return [(self.server(path), path)]
        pairs, problems = [], []
        for sample in self.samples():
            try:
                conn = self.group.connection(sample, self.deadline)
            except registry.NoServer:
                continue
            except (registry.Off, registry.Waiting) as exc:
                problems.append(str(exc))
                continue
            if all(conn is not other for other, _ in pairs):
                pairs.append((conn, sample))
        if not pairs and problems:
            raise Failed("; ".join(problems))
        return pairs

    def samples(self):
        """One file of each extension a server serves, found in the root."""
        seen = {}
        for path in self.walk():
            seen.setdefault(servers.extension(path), path)
        return list(seen.values())

    def walk(self, extensions=None):
        looked = 0
        for folder, dirs, names in os.walk(self.root):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIP_DIRS)
            for name in sorted(names):
                looked += 1
                if looked > MAX_WALK:
                    return
                if looked % 500 == 0:
                    gevent.idle()  # a big tree must not hold the hub
                path = os.path.join(folder, name)
                if (extensions is None and servers.wanted(path, self.settings)) or (
                        extensions is not None and servers.extension(name) in extensions):
                    yield path

    def scan(self, conn, query):
        """The symbols matching ``query`` in the root's files of ``conn``'s language."""
        paths = []
        for path in self.walk(set(conn.spec.extensions)):
            paths.append(path)
            if len(paths) >= MAX_SCAN:
                break
        wanted, out = query.lower(), []

        def symbols(path):
            was_open = files_uri(path) in conn.docs
            try:
                return self.document_symbols(path)
            except Failed:
                return []
            finally:
                if not was_open:
                    conn.close_doc(files_uri(path))
        pool = gevent.pool.Pool(8)
        with gevent.Timeout(self.remaining(), False):
            for found in pool.imap_unordered(symbols, paths):
                out += [s for s in found if wanted in s[0].lower()]
        pool.kill()
        return out

    # ------------------------------------------------------------ lines
    def locations(self, found):
        if found is None:
            return []
        items = found if isinstance(found, list) else [found]
        out = []
        for item in items:
            if not isinstance(item, dict):
                continue
            uri = item.get("targetUri") or item.get("uri")
            span = item.get("targetSelectionRange") or item.get("range")
            if isinstance(uri, str) and isinstance(span, dict):
                start = span.get("start") or {}
                out.append(self.where(_path(uri), start.get("line", 0), start.get("character", 0)))
        return out

    def where(self, path, line, units, column=None):
        """``path:line:column: source line`` for 0-based ``line`` and UTF-16 ``units``."""
        text = files.line_at(files.lines_of(self.text(path) or ""), line)
        if column is None:
            column = files.to_column(text, units or 0)
        return f"{files.shown(self.root, path)}:{line + 1}:{column}: {files.one_line(text, 200)}"

    def named(self, symbol):
        """``symbol`` with its column moved onto its name when the server gave the start
        of the whole declaration (``def f``, ``export function f``)."""
        name, kind, path, line, units = symbol
        text = files.line_at(files.lines_of(self.text(path) or ""), line)
        start = files.to_column(text, units) - 1
        found = text.find(name.split(".")[-1].split("(")[0], start)
        if found >= 0:
            units = files.to_units(text, found + 1)
        return name, kind, path, line, units

    def symbol_lines(self, symbols):
        return [f"{self.where(path, line, units)}  [{SYMBOL_KINDS.get(kind, 'symbol')} {name}]"
                for name, kind, path, line, units in map(self.named, symbols)]


def files_uri(path):
    from term2acp.lsp.connection import uri_of

    return uri_of(path)


def _path(uri):
    from term2acp.lsp.connection import path_of

    return path_of(uri)


def flatten(found, out=None):
    """``(name, kind, line, units)`` of a documentSymbol answer (nested or flat)."""
    out = [] if out is None else out
    for item in found or ():
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        span = item.get("selectionRange") or item.get("range") or \
            (item.get("location") or {}).get("range") or {}
        start = span.get("start") or {}
        out.append((item["name"], item.get("kind"), start.get("line", 0), start.get("character", 0)))
        flatten(item.get("children"), out)
    return out


def _information(item):
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        return None
    location = item.get("location") or {}
    uri = location.get("uri")
    if not isinstance(uri, str):
        return None
    start = (location.get("range") or {}).get("start") or {}
    return (item["name"], item.get("kind"), _path(uri), start.get("line", 0), start.get("character", 0))


def hover_text(found):
    if not isinstance(found, dict):
        return ""
    contents = found.get("contents")
    parts = contents if isinstance(contents, list) else [contents]
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, dict) and isinstance(part.get("value"), str):
            language = part.get("language")
            out.append(f"```{language}\n{part['value']}\n```" if language else part["value"])
    text = "\n\n".join(p.strip() for p in out if p and p.strip())
    return text if len(text) <= MAX_HOVER else text[:MAX_HOVER] + f"\n[hover cut at {MAX_HOVER} characters]"


def bounded(lines, what):
    """At most MAX_RESULTS lines, the rest counted."""
    if not lines:
        return f"No {what} found."
    out = lines[:MAX_RESULTS]
    if len(lines) > MAX_RESULTS:
        out.append(f"... and {len(lines) - MAX_RESULTS} more {what}")
    return "\n".join(out)
