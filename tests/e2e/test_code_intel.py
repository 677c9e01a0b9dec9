"""Code intelligence through the agent, v1 and v2, against real language servers (pylsp
with pyflakes from PyPI, typescript-language-server from npm; `.ci/run` installs both): the
new errors after edit_file, create_file and apply_patch go to the model and into the tool
call, bounded; the code tool answers definition, references, hover and symbols."""

import os

import pytest

from tests.support.lsp import lsp_env, needs_servers
from tests.support.toolcalls import call_text, finished_calls, model_server, start_agent, tool_results

pytestmark = needs_servers()

APP = "def area(r):\n    return 3.14 * r * r * old_error\n"


def write(workspace, name, text):
    with open(os.path.join(workspace, name), "w") as fh:
        fh.write(text)


def patch(*lines):
    return "\n".join(("*** Begin Patch",) + lines + ("*** End Patch",)) + "\n"


@pytest.mark.parametrize("protocol", [1, 2])
def test_writes_report_only_their_new_errors_to_the_model_and_the_editor(
        acp_agent, workspace, tmp_path, protocol):
    write(workspace, "app.py", APP)
    edit = {"path": "app.py", "edits": [{"old_text": "def area(r):\n",
                                         "new_text": "def area(r):\n    print(nope_edit)\n"}]}
    create = {"path": "new.py", "content": "import os\n\nprint(nope_create)\n"}
    change = patch("*** Update File: app.py", "@@", "     return 3.14 * r * r * old_error",
                   "+print(nope_patch)", "*** Add File: ok.py", "+x = 1")
    many = {"path": "many.py", "content": "".join(f"v{i} = undefined_{i}\n" for i in range(300))}
    typed = {"path": "bad.ts", "content": "export const y: number = notDefined;\n"}
    server = model_server([[("edit_file", edit)], [("create_file", create)],
                           [("apply_patch", {"input": change})], [("create_file", many)],
                           [("create_file", typed)]])
    try:
        agent = start_agent(acp_agent, server, protocol, env=lsp_env(tmp_path))
        sid = agent.new_session(workspace)
        _, updates, _ = agent.prompt(sid, "write", timeout=120)
        calls = finished_calls(updates)
        assert [c["status"] for c in calls] == ["completed"] * 5
        results = tool_results(server)
        edited, created, patched, bounded, typescript = (results[f"call_{i}"] for i in range(5))
        # the edit's own error, where it is; the error the file had (moved a line) is not new
        assert "app.py:2:11: error: undefined name 'nope_edit' (pyflakes)" in edited
        assert "old_error" not in edited and "Edited app.py" in edited
        assert "new.py:3:7: error: undefined name 'nope_create' (pyflakes)" in created
        assert "'os' imported but unused" not in created  # a warning: not configured
        assert "app.py:4:7: error: undefined name 'nope_patch'" in patched
        assert "nope_edit" not in patched and "old_error" not in patched
        assert "ok.py" not in patched.split("after this change:")[1]
        lines = [line for line in bounded.splitlines() if line.startswith("many.py:")]
        assert len(lines) == 20 and lines[0].startswith("many.py:1:6: error: undefined name")
        assert "... and 280 more errors in many.py" in bounded and len(bounded) < 4096
        assert "bad.ts:1:26: error: Cannot find name 'notDefined'. Did you mean 'undefined'? (typescript)" in typescript
        # the editor sees the same text in the tool call, beside the diff
        for call, result in zip(calls, (edited, created, patched, bounded, typescript)):
            report = result[result.index("New problems"):]
            assert report in call_text(call)
            assert any(item.get("type") == "diff" for item in call["content"])
        assert open(os.path.join(workspace, "app.py")).read().endswith("print(nope_patch)\n")
        assert agent.close() == 0
    finally:
        server.stop()


UTIL = '''def helper(x):
    """Double x."""
    return x * 2


class Greeter:
    def greet(self, name):
        return "hi " + name
'''
USE = "from util import helper\n\nprint(helper(3))\n"
LIB = "export function twice(n: number): number {\n  return n * 2;\n}\n"
INDEX = 'import { twice } from "./lib";\n\nexport const four = twice(2);\n'


@pytest.mark.parametrize("protocol", [1, 2])
def test_the_code_tool_answers_by_position_and_by_name(acp_agent, workspace, tmp_path, protocol):
    for name, text in (("util.py", UTIL), ("app.py", USE), ("lib.ts", LIB), ("index.ts", INDEX),
                       ("tsconfig.json", '{"compilerOptions": {"strict": true}}\n')):
        write(workspace, name, text)
    asks = [{"operation": "definition", "path": "app.py", "line": 3, "column": 7},
            {"operation": "references", "symbol": "helper"},
            {"operation": "hover", "path": "app.py", "line": 3, "column": 7},
            {"operation": "document_symbols", "path": "util.py"},
            {"operation": "workspace_symbols", "symbol": "greet"},
            {"operation": "definition", "path": "index.ts", "line": 3, "column": 21},
            {"operation": "references", "path": "lib.ts", "symbol": "twice"},
            {"operation": "hover", "symbol": "twice", "path": "lib.ts"},
            {"operation": "workspace_symbols", "symbol": "twi", "path": "index.ts"},
            {"operation": "definition", "symbol": "Greeter"},
            {"operation": "document_symbols", "path": "notes.zz"},
            {"operation": "document_symbols", "path": "notes.md"}]
    write(workspace, "notes.zz", "zz\n")
    write(workspace, "notes.md", "# notes\n")
    server = model_server([[("code", ask)] for ask in asks])
    nowhere = '[lsp.servers.nowhere]\ncommand = ["no-such-language-server"]\nextensions = ["zz"]\n'
    try:  # read-only mode: the code tool only reads
        agent = start_agent(acp_agent, server, protocol,
                            env=lsp_env(tmp_path, nowhere, top='mode = "read-only"\n'))
        sid = agent.new_session(workspace)
        _, updates, _ = agent.prompt(sid, "look", timeout=120)
        calls = finished_calls(updates)
        assert [c["status"] for c in calls] == ["completed"] * (len(asks) - 2) + ["failed"] * 2
        assert "no language server for .zz files was found on the agent's PATH (looked for: " \
            "no-such-language-server)" in call_text(calls[-2])
        assert "no language server serves .md files" in call_text(calls[-1])
        got = [tool_results(server)[f"call_{i}"] for i in range(len(asks))]
        assert got[0] == "util.py:1:5: def helper(x):"
        assert got[1].splitlines() == ["app.py:1:18: from util import helper",
                                       "app.py:3:7: print(helper(3))", "util.py:1:5: def helper(x):"]
        assert got[2].startswith("app.py:3:7: print(helper(3))\n") and "Double x." in got[2]
        assert got[3].splitlines() == ["util.py:1:5: def helper(x):  [function helper]",
                                       "util.py:6:7: class Greeter:  [class Greeter]",
                                       "util.py:7:9: def greet(self, name):  [method greet]"]
        # pylsp has no workspace/symbol: the document symbols of the root's Python files
        # stand in (a name containing the query, exact names first)
        assert got[4].splitlines() == ["util.py:7:9: def greet(self, name):  [method greet]",
                                       "util.py:6:7: class Greeter:  [class Greeter]"]
        assert got[5] == "lib.ts:1:17: export function twice(n: number): number {"
        assert got[6].splitlines() == ["lib.ts:1:17: export function twice(n: number): number {",
                                       'index.ts:1:10: import { twice } from "./lib";',
                                       "index.ts:3:21: export const four = twice(2);"]
        assert "function twice(n: number): number" in got[7]
        assert got[8] == "lib.ts:1:17: export function twice(n: number): number {  [function twice]"
        assert got[9] == "util.py:6:7: class Greeter:"
        assert "util.py:1:5: def helper(x):" in call_text(calls[0])
        assert agent.close() == 0
    finally:
        server.stop()
