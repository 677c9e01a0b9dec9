"""A plain start-up, through ``bin/term2-acp`` as editors spawn it (a process of its own):
a prompt sent right after ``initialize`` and ``session/new`` runs its tools; the optional
modules stay out until used; a broken plug-in is logged and skipped. (A damaged store is
tests/e2e/test_hardening_runtime.py's.)"""

import re
import sys

from term2acp.testing.harness import REPO_LAUNCHER, AgentProcess
from tests.support.scripts import write_script

# imported only when used: the local engines, RE2 (grep), docopt (a command line with
# arguments) and the MCP transports (a session's MCP servers); html-to-markdown (web_fetch)
# is the preload's, after the sandbox probe
OPTIONAL = {"llama_cpp", "xllamacpp", "re2", "docopt",
            "term2acp.mcp.stdio", "term2acp.mcp.http"}
IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)\s*$", re.M)


def _start(acp_env, home, script, **env):
    """The launcher without arguments, as editors spawn it (the provider named in the
    environment), logging every import statement on stderr."""
    env = dict(acp_env, TERM2ACP_HOME=str(home), TERM2ACP_SCRIPT=str(script),
               TERM2ACP_PROVIDER="scripted", **env)
    command = [sys.executable, "-X", "importtime", REPO_LAUNCHER]
    return AgentProcess(env=env, command=command).start()


def _read_file_turns(tmp_path, workspace):
    (tmp_path / "work" / "notes.txt").write_text("the notes\n")
    return write_script(tmp_path, [
        [{"tool_call": {"name": "read_file", "arguments": {"path": "notes.txt"}}}],
        [{"text": "read"}]])


def _completed(updates):
    return [u for u in updates
            if u["sessionUpdate"] == "tool_call_update" and u.get("status") == "completed"]


def _read_the_notes(agent, workspace):
    """A session's first prompt, sent as soon as the agent answers, reads a file."""
    try:
        agent.initialize()
        session_id = agent.new_session(workspace)
        _, updates, _ = agent.prompt(session_id, "read the notes")
        assert "the notes" in str(_completed(updates)[0]["content"])
    finally:
        assert agent.close() == 0


def test_a_prompt_right_after_start_up_runs_and_optional_modules_stay_out(
        acp_env, home, workspace, tmp_path):
    agent = _start(acp_env, home, _read_file_turns(tmp_path, workspace))
    _read_the_notes(agent, workspace)
    imported = set(IMPORTED.findall(agent.stderr))
    # (import statements are logged, importlib.import_module calls are not)
    assert {"term2acp.tools.search", "term2acp.tools.web_fetch"} <= imported
    assert not imported & OPTIONAL, imported & OPTIONAL


def test_a_broken_tool_plug_in_is_logged_and_the_others_work(acp_env, home, workspace, tmp_path):
    site = tmp_path / "site"
    info = site / "t2a_broken-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: t2a-broken\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[term2acp.tools]\nbroken = t2a_missing_module:tool\n")
    agent = _start(acp_env, home, _read_file_turns(tmp_path, workspace),
                   PYTHONPATH=str(site))
    _read_the_notes(agent, workspace)
    assert re.search(r"plug-in broken \(t2a_missing_module:tool\) skipped: "
                     r"ModuleNotFoundError", agent.stderr), agent.stderr[-3000:]
