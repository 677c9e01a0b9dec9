"""The rings: wire knows nothing of ACP, the runtime never imports the wire or ACP, and the
launcher's start-up path does not import the session layer or provider SDKs."""

import subprocess
import sys

import pytest


def modules_after(statement):
    code = (f"import sys; before = set(sys.modules); {statement}; "
            "print('\\n'.join(sorted(set(sys.modules) - before)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=sys.path[0] or None)
    return set(out.stdout.split())


@pytest.mark.parametrize("module", ["term2acp.rpc.endpoint", "term2acp.rpc.stream"])
def test_layering_wire_knows_nothing_of_acp_or_the_runtime(module):
    gained = modules_after(f"import {module}")
    assert not {m for m in gained if m.startswith(("term2acp.acp", "term2acp.sessions",
                                                    "term2acp.agent", "term2acp.tools"))}
    assert "marshmallow" not in gained


@pytest.mark.parametrize("module", ["term2acp.sessions.manager", "term2acp.agent.turn",
                                    "term2acp.tools.registry", "term2acp.sandbox.bwrap",
                                    "term2acp.providers.catalog", "term2acp.mcp.hub",
                                    "term2acp.agent.context", "term2acp.agent.commands",
                                    "term2acp.providers.http", "term2acp.sessions.options"])
def test_layering_runtime_never_imports_wire_or_acp(module):
    gained = modules_after(f"import {module}")
    assert not {m for m in gained if m.startswith(("term2acp.rpc", "term2acp.acp"))}


def test_layering_startup_path_stays_lean():
    gained = modules_after("import term2acp.server, term2acp.cli")
    for heavy in ("sqlite3", "openai", "anthropic", "llama_cpp", "sh", "term2acp.sessions.manager",
                  "term2acp.tools.registry"):
        assert heavy not in gained, heavy


@pytest.mark.parametrize("module", ["term2acp.core.sensitive", "term2acp.core.nesting",
                                    "term2acp.core.pacing"])
def test_layering_core_depends_on_nothing_of_ours(module):
    gained = modules_after(f"import {module}")
    assert {m for m in gained if m.startswith("term2acp.")} <= {
        "term2acp.core", module} | {m for m in gained if m.startswith("term2acp.core.")}
