"""The rings: wire knows nothing of ACP, the runtime never imports the wire or ACP, and the
launcher's start-up path does not import the session layer or provider SDKs."""

import re
import subprocess
import sys

import pytest


def modules_after(statement):
    code = (f"import sys; before = set(sys.modules); {statement}; "
            "print('\\n'.join(sorted(set(sys.modules) - before)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=sys.path[0] or None)
    return set(out.stdout.split())


@pytest.mark.parametrize("module", ["term2acp.rpc.endpoint", "term2acp.rpc.stream",
                                    "term2acp.rpc.messages"])
def test_layering_wire_knows_nothing_of_acp_or_the_runtime(module):
    gained = modules_after(f"import {module}")
    assert not {m for m in gained if m.startswith(("term2acp.acp", "term2acp.sessions",
                                                    "term2acp.turns", "term2acp.tools"))}
    assert "marshmallow" not in gained


@pytest.mark.parametrize("module", ["term2acp.sessions.manager", "term2acp.turns.turn",
                                    "term2acp.tools.registry", "term2acp.sandbox.bwrap",
                                    "term2acp.providers.catalog", "term2acp.mcp.hub",
                                    "term2acp.turns.context", "term2acp.turns.compaction",
                                    "term2acp.turns.commands",
                                    "term2acp.providers.http", "term2acp.sessions.config_options",
                                    "term2acp.net.connection", "term2acp.net.sse"])
def test_layering_runtime_never_imports_wire_or_acp(module):
    gained = modules_after(f"import {module}")
    assert not {m for m in gained if m.startswith(("term2acp.rpc", "term2acp.acp"))}


def test_layering_what_the_preload_prepares_is_not_on_the_start_up_path():
    """The launcher's imports leave the preload's modules (tools, sandbox and ``sh``, the
    providers' HTTP client and each provider) to it, and the optional ones to their use."""
    from term2acp.preload import MODULES

    gained = modules_after("import term2acp.patching; term2acp.patching.patch_all(); "
                           "import term2acp.server, term2acp.cli")
    assert "term2acp.sessions.manager" in gained  # the session layer is in: session/new is quick
    late = set(MODULES) | {"sh", "term2acp.providers.openai", "term2acp.providers.anthropic",
                           "term2acp.providers.scripted", "term2acp.providers.local_engine",
                           "term2acp.mcp.stdio", "term2acp.mcp.http", "http.client",
                           "term2acp.net.connection", "term2acp.net.sse",
                           "llama_cpp", "xllamacpp", "re2", "html_to_markdown", "docopt"}
    assert not late & gained, late & gained


@pytest.mark.parametrize("module", ["term2acp.core.sensitive", "term2acp.core.nesting",
                                    "term2acp.core.pacing"])
def test_layering_core_depends_on_nothing_of_ours(module):
    gained = modules_after(f"import {module}")
    assert {m for m in gained if m.startswith("term2acp.")} <= {
        "term2acp.core", module} | {m for m in gained if m.startswith("term2acp.core.")}


# The package order: each package may import only packages before it (lazy imports
# included), so there are no cycles and the shared vocabulary lives in ``core``.
PACKAGE_ORDER = ["interpreter", "core", "net", "providers", "config_fields", "config", "auth", "settings",
                 "sandbox", "rpc", "lsp", "tools", "mcp", "turns", "sessions", "acp", "preload", "diagnostics", "server", "headless", "patching",
                 "cli", "__main__"]


def package_imports():
    import ast
    import os

    base = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "term2acp")
    graph = {}
    for folder, _dirs, files in os.walk(base):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, base).split(os.sep)
            source = rel[0][:-3] if len(rel) == 1 else rel[0]
            if source in ("__init__", "testing", "client"):  # the kit and the chat client
                continue                                      # sit outside the agent
            with open(path, encoding="utf-8") as fh:
                tree = ast.parse(fh.read())
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module]
                elif isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                else:
                    continue
                for module in names:
                    parts = module.split(".")
                    if parts[0] == "term2acp" and len(parts) > 1 and parts[1] != source:
                        graph.setdefault(source, set()).add(parts[1])
    return graph


def test_layering_packages_import_only_earlier_packages():
    graph = package_imports()
    assert set(graph) <= set(PACKAGE_ORDER), set(graph) - set(PACKAGE_ORDER)
    rank = {name: i for i, name in enumerate(PACKAGE_ORDER)}
    backwards = sorted(f"{source} -> {target}" for source, targets in graph.items()
                       for target in targets if rank[target] >= rank[source])
    assert not backwards, backwards


def test_layering_the_v2_face_never_imports_v1():
    """v1 says what v2 says in other shapes and may reuse v2's pieces; never the reverse."""
    gained = modules_after("import term2acp.acp.v2.handlers, term2acp.acp.v2.routes, "
                           "term2acp.acp.v2.permissions, term2acp.acp.v2.translate")
    assert not {m for m in gained if m.startswith("term2acp.acp.v1")}


def module_imports():
    """Each module of term2acp -> the modules of term2acp it imports, lazy imports and
    ``importlib.import_module("...")`` with a literal name included."""
    import ast
    import os

    base = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "term2acp")
    paths = {}
    for folder, _dirs, files in os.walk(base):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                module = ".".join(["term2acp"] + os.path.relpath(path, base)[:-3].split(os.sep))
                paths[module.removesuffix(".__init__")] = path
    graph = {}
    for module, path in paths.items():
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
        found = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    child = f"{node.module}.{alias.name}"
                    found.add(child if child in paths else node.module)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module"
                  and node.args and isinstance(node.args[0], ast.Constant)):
                found.add(node.args[0].value)
        graph[module] = {m for m in found if m in paths and m != module}
    return graph


def test_layering_no_module_import_cycle():
    """No two modules import each other, directly or through others, even lazily: a lazy
    import that closes a cycle hides an order problem instead of solving it."""
    graph = module_imports()
    state = {}  # module -> "open" while on the path, "done" after

    def visit(module, path):
        state[module] = "open"
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                raise AssertionError(" -> ".join(path[path.index(target):] + [target]))
            if target not in state:
                visit(target, path + [target])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


MAX_MODULE_LINES = 400


def test_layering_no_module_over_400_lines():
    """Modules stay small enough to read whole: past the bound, split along a real seam
    (an object owning one part of a class's work, a module for one concern), not by
    cutting in two."""
    import os

    base = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "term2acp")
    over = {}
    for folder, _dirs, files in os.walk(base):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as fh:
                    count = sum(1 for _ in fh)
                if count > MAX_MODULE_LINES:
                    over[os.path.relpath(path, base)] = count
    assert not over, over


SQL = r"\b(SELECT\s.*\bFROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|" \
      r"(CREATE|ALTER|DROP)\s+TABLE|PRAGMA\s+\w+)\b"


def test_layering_sql_only_in_the_store_package():
    """The store's tables are written and read through its named methods (``Store.turns``,
    ``Store.recording``, ...): no SQL statement outside ``sessions/store/``, and the raw
    row access is private to it."""
    import ast
    import os
    import re

    from term2acp.sessions.store import Store

    base = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "term2acp")
    store = os.path.join(base, "sessions", "store")
    found = []
    for folder, _dirs, files in os.walk(base):
        if folder == store or folder.startswith(store + os.sep):
            continue
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as fh:
                    tree = ast.parse(fh.read())
                for node in ast.walk(tree):
                    if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                            and re.search(SQL, node.value):
                        found.append(f"{os.path.relpath(path, base)}:{node.lineno}")
    assert not found, found
    assert not {"rows", "write", "execute"} & set(dir(Store))


def test_layering_the_manager_owns_its_parts_not_mixins():
    """The session manager's prompts and dormant sessions are objects it holds, each with
    its own state, not classes mixed into it."""
    from term2acp.sessions.dormant import DormantSessions
    from term2acp.sessions.manager import SessionManager
    from term2acp.sessions.prompts import Prompts

    for cls in (SessionManager, Prompts, DormantSessions):
        assert cls.__bases__ == (object,), cls


# The one network path (term2acp/net/): what makes an HTTP connection, resolves a name,
# builds a TLS context or decodes server-sent events, and the modules allowed to.
NETWORK_NAMES = {"HTTPConnection", "HTTPSConnection", "create_connection", "urlopen",
                 "getaddrinfo", "create_default_context", "SSLContext", "wrap_socket"}
NETWORK_MODULES = {"http.client", "urllib.request", "urllib3", "requests", "httpx", "aiohttp"}
NETWORK_HOME = ("net/address.py", "net/connection.py")
SSE_FIELD = re.compile(r"""(==|!=)\s*b?["'](data|event|retry)["']|"""
                       r"""startswith\(\s*b?["'](data|event):""")


def _sources():
    import os

    base = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "term2acp")
    for folder, _dirs, files in os.walk(base):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as fh:
                    yield os.path.relpath(path, base).replace(os.sep, "/"), fh.read()


def test_layering_one_http_connection_factory():
    """Providers, web_fetch and MCP reach servers through ``term2acp/net/`` only (one place
    for the proxy, the CAs, the loopback rule): no other module makes a connection, looks
    up a name or builds a TLS context, nor imports an HTTP client library."""
    import ast

    found = []
    for rel, text in _sources():
        if rel in NETWORK_HOME:
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Attribute) and node.attr in NETWORK_NAMES:
                found.append(f"{rel}:{node.lineno} {node.attr}")
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = {node.module} | {f"{node.module}.{a.name}" for a in node.names}
                if names & NETWORK_MODULES or {a.name for a in node.names} & NETWORK_NAMES:
                    found.append(f"{rel}:{node.lineno} from {node.module} import")
            elif isinstance(node, ast.Import):
                found += [f"{rel}:{node.lineno} import {a.name}" for a in node.names
                          if a.name in NETWORK_MODULES or a.name.split(".")[0] in NETWORK_MODULES]
    assert not found, found


def test_layering_one_sse_decoder():
    """Server-sent events are decoded by ``net/sse.py`` alone (model streams and MCP)."""
    found = [f"{rel}:{text[:m.start()].count(chr(10)) + 1} {m.group(0)}"
             for rel, text in _sources() if rel != "net/sse.py"
             for m in SSE_FIELD.finditer(text)]
    assert not found, found


def _a_session(node, names=("session",)):
    """``session``, ``x.session`` (or another of ``names``)."""
    import ast

    return (isinstance(node, ast.Name) and node.id in names) or \
        (isinstance(node, ast.Attribute) and node.attr in names)


def test_layering_a_live_session_declares_every_attribute_set_on_it():
    """``LiveSession`` declares its attributes (``__slots__``, so setting another fails at
    run time), among them every name of the turn layer's ``TurnSession``; and no module
    sets a name on a session that the class does not declare."""
    import ast

    from term2acp.sessions.live import LiveSession
    from term2acp.turns.session import TurnSession

    declared = set(LiveSession.__slots__)
    members = declared | {name for name in vars(LiveSession) if not name.startswith("__")}
    assert set(TurnSession.__annotations__) <= members, \
        set(TurnSession.__annotations__) - members
    undeclared = []
    for rel, text in _sources():
        if rel == "turns/agents/child.py":  # ChildSession's own (its class sets them)
            continue
        for node in ast.walk(ast.parse(text)):
            name = None
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                    and _a_session(node.value):
                name = node.attr
            elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "setattr" \
                    and _a_session(node.args[0]) and isinstance(node.args[1], ast.Constant):
                name = node.args[1].value
            if name is not None and name not in declared:
                undeclared.append(f"{rel}:{node.lineno} session.{name}")
    assert not undeclared, undeclared


def test_layering_a_face_sets_nothing_on_a_session():
    """What a session needs of its protocol face is the face's ``FaceLink`` (sink, config
    options, editor access, failures as errors), given to the session manager as it opens
    the session and made into it by its constructor; what a face keeps per session is its
    own ``FaceSession`` record: nothing in ``acp/`` sets an attribute of a session."""
    import ast

    found = []
    for rel, text in _sources():
        if rel.startswith("acp/"):
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                        and _a_session(node.value) or isinstance(node, ast.Call) \
                        and getattr(node.func, "id", "") == "setattr" \
                        and _a_session(node.args[0]):
                    found.append(f"{rel}:{node.lineno} {ast.unparse(node)[:60]}")
    assert not found, found


def test_layering_the_turn_layer_touches_only_what_the_turn_session_names():
    """``turns/`` reads and writes a session only through ``turns/session.py``'s
    ``TurnSession`` (a child session's own names aside)."""
    import ast

    from term2acp.turns.session import TurnSession

    allowed = set(TurnSession.__annotations__) | {"call_id", "progress"}  # ChildSession's
    outside = []
    for rel, text in _sources():
        if not rel.startswith("turns/"):
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Attribute) and _a_session(node.value) \
                    and node.attr not in allowed:
                outside.append(f"{rel}:{node.lineno} session.{node.attr}")
    assert not outside, outside


def test_layering_no_session_or_settings_read_with_a_default():
    """``getattr(session, "name", default)`` and ``getattr(settings, ...)`` hide a misspelt
    name: every attribute of a live session and of the settings exists (declared, built
    whole), so they are read plainly."""
    import ast

    found = []
    for rel, text in _sources():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "getattr" \
                    and len(node.args) == 3 \
                    and _a_session(node.args[0], ("session", "settings", "_settings")):
                found.append(f"{rel}:{node.lineno} {ast.unparse(node)}")
    assert not found, found


# Who builds the settings: settings.py (Settings.load, and its own methods after) and
# cli.load (the provider and model it resolves with the catalog).
SETTINGS_LOADERS = ("settings.py", "cli.py")


def test_layering_settings_are_declared_and_set_only_by_their_loader():
    """``Settings`` and each section declare their attributes (``__slots__``: setting a
    misspelt name fails at run time) and make every one in their constructor; no module
    but the loader sets one (``settings.x = ...``, ``settings.shell.x = ...``, setattr)."""
    import ast
    import inspect

    from term2acp import settings as module

    for name, cls in vars(module).items():
        if inspect.isclass(cls) and name.endswith("Settings"):
            made = {node.attr for node in ast.walk(ast.parse(inspect.getsource(cls.__init__)
                                                             .strip().replace("\n    ", "\n")))
                    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                    and getattr(node.value, "id", "") == "self"}
            assert "__dict__" not in dir(cls), name
            assert set(cls.__slots__) - {"__weakref__"} == made, name
    names = ("settings", "_settings")
    found = []
    for rel, text in _sources():
        if rel in SETTINGS_LOADERS:
            continue
        for node in ast.walk(ast.parse(text)):
            target = None
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                target = node.value
            elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "setattr":
                target = node.args[0]
            while isinstance(target, ast.Attribute) and not _a_session(target, names):
                target = target.value  # settings.shell.network = ...
            if target is not None and _a_session(target, names):
                found.append(f"{rel}:{node.lineno} {ast.unparse(node)[:60]}")
    assert not found, found


# sys.modules lookups still to go (none: the session's shell and language servers are
# owned by the session, issue 35 item 3).
SYS_MODULES_LEFT = set()


def test_layering_no_sys_modules_lookup():
    """A module reaches another by importing it (at its top, or where first needed), never
    through ``sys.modules``: a lookup by name hides who depends on whom from the import
    graph (and from the cycle check above), and works only when someone else imported it."""
    import ast

    found = []
    for rel, text in _sources():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Attribute) and node.attr == "modules" \
                    and getattr(node.value, "id", "") == "sys" \
                    or isinstance(node, ast.ImportFrom) and node.module == "sys" \
                    and any(alias.name == "modules" for alias in node.names):
                found.append(f"{rel}:{node.lineno}")
    assert {spot.split(":")[0] for spot in found} <= SYS_MODULES_LEFT, found


# The composition root and the objects it builds: each is built whole by its constructor
BUILT_WHOLE = ("server.py", "acp/connection.py", "acp/capabilities.py", "rpc/endpoint.py",
               "rpc/peer.py", "mcp/hub.py")


def test_layering_objects_are_built_whole_not_finished_after():
    """In the composition root and the wire objects, an object sets only its own
    attributes (``self.x = ...``): nothing sets another object's attribute after building
    it (``endpoint.router = ...``, ``face.compaction = ...``, a route's handler patched
    by name), so what each needs is what its constructor takes. A greenlet's ``name`` (what
    a dump shows) is the one exception."""
    import ast

    found = []
    for rel, text in _sources():
        if rel not in BUILT_WHOLE:
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                    and getattr(node.value, "id", "") != "self" and node.attr != "name":
                found.append(f"{rel}:{node.lineno} {ast.unparse(node)}")
            elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "setattr":
                found.append(f"{rel}:{node.lineno} {ast.unparse(node)}")
    assert not found, found


def test_layering_the_turn_is_one_object_not_mixins():
    """``Turn`` is built of owned objects (each tool call a ``turns/calls.py`` ToolCall,
    scheduled by ``turns/rounds.py``'s one engine), never of classes mixed into it; a
    sub-agent's turn is a ``Turn``."""
    from term2acp.turns.agents.child import ChildTurn
    from term2acp.turns.calls import ToolCall
    from term2acp.turns.turn import Turn

    assert Turn.__bases__ == (object,), Turn.__bases__
    assert ToolCall.__bases__ == (object,), ToolCall.__bases__
    assert ChildTurn.__bases__ == (Turn,), ChildTurn.__bases__


# The one process module (issue 35 item 6b): what starts a child process, and the one
# module that may do without it.
PROCESS_HOME = "sandbox/process.py"
PROCESS_MODULES = {"subprocess", "gevent.subprocess", "sh", "pty", "multiprocessing"}
PROCESS_CALLS = {"Popen", "fork", "forkpty", "fork_and_watch", "posix_spawn", "posix_spawnp",
                 "spawnv", "spawnve", "spawnvp", "spawnvpe", "spawnl", "spawnlp", "system",
                 "popen", "create_subprocess_exec", "create_subprocess_shell"}
PROCESSES_LEFT = {"interpreter.py": "re-executes the launcher itself (os.execv, no child)"}


def test_layering_one_module_starts_child_processes():
    """Every child process the agent starts (sandboxed or not) is started, watched and
    ended by ``sandbox/process.py`` (the only user of ``sh``): no other module imports a
    process library or calls a process-starting function (the test kit and the chat
    client sit outside the agent)."""
    import ast

    found = {}
    for rel, text in _sources():
        if rel == PROCESS_HOME or rel.startswith(("testing/", "client/")):
            continue
        for node in ast.walk(ast.parse(text)):
            spot = None
            if isinstance(node, ast.Import):
                spot = next((a.name for a in node.names if a.name in PROCESS_MODULES), None)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = {node.module} | {f"{node.module}.{a.name}" for a in node.names}
                spot = next(iter(sorted(names & PROCESS_MODULES)), None)
                if spot is None and {a.name for a in node.names} & PROCESS_CALLS and \
                        node.module in ("os", "gevent.os", "asyncio"):
                    spot = node.module
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in PROCESS_CALLS | {"execv", "execve", "execvp", "execvpe"} \
                    and ast.unparse(node.func.value) in PROCESS_MODULES | {"os", "gevent.os",
                                                                           "asyncio"}:
                spot = f"{ast.unparse(node.func)}()"
            if spot is not None:
                found.setdefault(rel, []).append(f"{node.lineno} {spot}")
    assert set(found) <= set(PROCESSES_LEFT), {k: v for k, v in found.items()
                                               if k not in PROCESSES_LEFT}
