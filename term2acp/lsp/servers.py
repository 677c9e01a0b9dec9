"""Which language server serves a file, and what the sandbox shows of its installation.

The built-ins are looked up by name on the agent's PATH with the rules the sandbox's own
``bwrap`` has (``core/executables.py``: absolute entries only, pinned, never inside a
session root); for Python the first found of four. Servers of the config file
(``[lsp.servers.<name>]``) come first for their extensions; ``[lsp] disabled`` turns
built-ins off by name and ``[lsp] enabled = false`` all of them.

A server runs in the sandbox, which shows the system directories, the workspace and the
home toolchains; :func:`installation` adds, read-only, what the server itself needs
wherever it lives: its executable, the interpreter its ``#!`` line names (``env node``
looked up the same way), and their prefixes (the folder above a ``bin``, or the outermost
``node_modules``), never a prefix that is ``/``, the home or a folder holding the root.
"""

import os
from dataclasses import dataclass, field

from term2acp.core import executables

PYTHON = ("py", "pyi")
SCRIPT = ("ts", "tsx", "mts", "cts", "js", "jsx", "mjs", "cjs")
C_FAMILY = ("c", "h", "cc", "cpp", "cxx", "c++", "hh", "hpp", "hxx")
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc")  # the sandbox shows them
LANGUAGE_IDS = {"py": "python", "pyi": "python", "ts": "typescript", "mts": "typescript",
                "cts": "typescript", "tsx": "typescriptreact", "js": "javascript",
                "mjs": "javascript", "cjs": "javascript", "jsx": "javascriptreact",
                "go": "go", "rs": "rust", "c": "c", "h": "c"}


@dataclass(eq=False)
class Spec:
    """A language server: its ``name`` (the config key), a ``group`` (servers of one group
    serve the same files: the first found is used), its command line, the extensions
    (lower case, no dot) it serves and, optionally, files one of which must be in the
    root or between it and the file (``root_markers``)."""

    name: str
    group: str
    command: tuple
    extensions: tuple
    root_markers: tuple = ()
    init_options: dict = field(default_factory=dict)


BUILTINS = (
    Spec("basedpyright", "python", ("basedpyright-langserver", "--stdio"), PYTHON),
    Spec("pyright", "python", ("pyright-langserver", "--stdio"), PYTHON),
    Spec("pylsp", "python", ("pylsp",), PYTHON),
    Spec("jedi-language-server", "python", ("jedi-language-server",), PYTHON),
    # one tsserver: the syntax-only one answers before the project is loaded, wrongly
    Spec("typescript-language-server", "typescript", ("typescript-language-server", "--stdio"),
         SCRIPT, init_options={"tsserver": {"useSyntaxServer": "never"}}),
    Spec("gopls", "go", ("gopls",), ("go",), ("go.mod", "go.work")),
    Spec("rust-analyzer", "rust", ("rust-analyzer",), ("rs",), ("Cargo.toml",)),
    Spec("clangd", "c", ("clangd",), C_FAMILY),
)


def extension(path):
    return os.path.splitext(path)[1][1:].lower()


def language_id(path):
    ext = extension(path)
    return LANGUAGE_IDS.get(ext, "cpp" if ext in C_FAMILY else ext)


def specs(settings):
    """Every server that may run, configured ones first."""
    lsp = settings.lsp
    if not lsp.enabled:
        return []
    out = [Spec(name, f"config:{name}", tuple(table["command"]),
                tuple(e.lower().lstrip(".") for e in table["extensions"]),
                tuple(table.get("root_markers", ())), dict(table.get("initialization_options") or {}))
           for name, table in sorted(lsp.servers.items())]
    taken = {ext for spec in out for ext in spec.extensions}
    out += [spec for spec in BUILTINS if spec.name not in lsp.disabled
            and not set(spec.extensions) & taken]
    return out


def wanted(path, settings):
    """Whether some server may serve ``path`` (no lookup: cheap, for every write)."""
    ext = extension(path)
    return bool(ext) and any(ext in spec.extensions for spec in specs(settings))


def known_names(settings):
    return [spec.command[0] for spec in specs(settings)]


@dataclass
class Found:
    spec: Spec
    argv: list  # the executable resolved, then the arguments
    visible: list  # what of its installation the sandbox shows read-only


class Unusable(Exception):
    """A server was found but may not run (it lies inside a session root)."""


def lookup(path, root, settings):
    """``(Found or None, names looked for)`` for the file ``path`` (canonical) in ``root``."""
    ext, looked, seen = extension(path), [], set()
    env_path = settings.env.get("PATH")
    for spec in specs(settings):
        if ext not in spec.extensions or spec.group in seen:
            continue
        looked.append(spec.command[0])
        if spec.root_markers and not _marked(path, root, spec.root_markers):
            continue
        program = _resolve(spec.command[0], env_path)
        if program is None:
            continue
        seen.add(spec.group)
        try:
            executables.check(program, [root])
        except executables.Unsafe as exc:
            raise Unusable(str(exc)) from None
        return Found(spec, [program, *spec.command[1:]], installation(program, root, env_path)), looked
    return None, looked


def _resolve(command, env_path):
    if os.path.isabs(command):
        return command if os.path.isfile(command) and os.access(command, os.X_OK) else None
    return executables.find(command, env_path)


def _marked(path, root, markers):
    folder = os.path.dirname(path)
    while True:
        if any(os.path.exists(os.path.join(folder, marker)) for marker in markers):
            return True
        if folder == root or not folder.startswith(root.rstrip(os.sep) + os.sep):
            return False
        folder = os.path.dirname(folder)


def installation(program, root, env_path):
    """The paths to show read-only so that ``program`` runs in the sandbox."""
    found = {program, os.path.realpath(program)}
    interpreter = _shebang(os.path.realpath(program))
    if interpreter:
        name = interpreter[0]
        if os.path.basename(name) == "env":
            words = [w for w in interpreter[1:] if not w.startswith("-")]
            name = executables.find(words[0], env_path) if words else None
        if name and os.path.isabs(name):
            found |= {name, os.path.realpath(name)}
    home = os.path.realpath(os.path.expanduser("~"))
    out = set()
    for path in found:
        if any(path == d or path.startswith(d + os.sep) for d in SYSTEM):
            continue  # always visible
        prefix = _prefix(path)
        held = prefix in ("/", home) or (root + os.sep).startswith(prefix.rstrip(os.sep) + os.sep)
        out.add(path if held else prefix)
    return sorted(out)


def _prefix(path):
    parts = path.split(os.sep)
    if "node_modules" in parts:
        return os.sep.join(parts[:parts.index("node_modules") + 1])
    parent = os.path.dirname(path)
    return os.path.dirname(parent) if os.path.basename(parent) == "bin" else path


def _shebang(path):
    try:
        with open(path, "rb") as fh:
            head = fh.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    line = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace")
    return line.split() or None


def sandbox_settings(settings, visible):
    """``settings`` with ``visible`` added to the sandbox's read paths (a copy)."""
    return settings.reading_also(visible)
