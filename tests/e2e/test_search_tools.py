"""grep's output modes, context, multiline and type filter, and glob's newest-first order,
through the launcher with a fake model server making the calls, ACP v1 and v2."""

import os

import pytest

from tests.support.toolcalls import finished_calls, model_server, start_agent, tool_results

FILES = {"src/app.py": "import os\n\n\ndef main():\n    run()\n    return 0\n",
         "src/util.py": "def run():\n    pass\n",
         "web/app.js": "function main() {\n  run();\n}\n",
         "notes.txt": "run the tests\n"}


@pytest.mark.parametrize("protocol", [1, 2])
def test_grep_modes_context_multiline_and_type(acp_agent, workspace, protocol):
    for rel, text in FILES.items():
        os.makedirs(os.path.dirname(os.path.join(workspace, rel)), exist_ok=True)
        with open(os.path.join(workspace, rel), "w") as fh:
            fh.write(text)
    os.utime(os.path.join(workspace, "src/util.py"), (2_000_000_000, 2_000_000_000))
    calls = [("grep", {"pattern": "run"}),
             ("grep", {"pattern": "run", "output_mode": "files_with_matches"}),
             ("grep", {"pattern": "run", "output_mode": "count", "type": "py"}),
             ("grep", {"pattern": "run\\(\\)", "context": 1, "type": "py"}),
             ("grep", {"pattern": "def main\\(\\):\\n\\s+run", "multiline": True}),
             ("glob", {"pattern": "**/*.py", "sort": "newest"})]
    server = model_server([calls])
    try:
        agent = start_agent(acp_agent, server, protocol)
        sid = agent.new_session(workspace)
        _, updates, _ = agent.prompt(sid, "search", timeout=30)
        assert [c["status"] for c in finished_calls(updates)] == ["completed"] * len(calls)
        results = tool_results(server)
        content, files, count, context, multi, newest = (results[f"call_{n}"]
                                                         for n in range(len(calls)))
        assert content.splitlines() == ["notes.txt:1: run the tests", "src/app.py:5:     run()",
                                        "src/util.py:1: def run():", "web/app.js:2:   run();"]
        assert files.splitlines() == ["notes.txt", "src/app.py", "src/util.py", "web/app.js"]
        assert count.splitlines() == ["src/app.py: 1", "src/util.py: 1"]
        assert context.splitlines() == ["src/app.py-4- def main():", "src/app.py:5:     run()",
                                        "src/app.py-6-     return 0", "--",
                                        "src/util.py:1: def run():", "src/util.py-2-     pass"]
        assert multi.splitlines() == ["src/app.py:4: def main():", "src/app.py:5:     run()"]
        assert newest.splitlines() == ["src/util.py", "src/app.py"]
        assert agent.close() == 0
    finally:
        server.stop()
