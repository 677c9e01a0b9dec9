"""A session whose turn ran two sub-agents side by side, recorded through the launcher
against a fake model server, exported as a pytest test and replayed with no model: each
child gets its own recorded replies back, whatever order their requests come in."""

import json
import os
import subprocess
import sys

import pytest

from tests.e2e.test_sessions_cli import ROOT, case_of, cli
from tests.support import agents as a

CONFIG = '[providers.openai]\napi = "chat"\n'


@pytest.mark.acp_process
def test_an_exported_session_with_sub_agents_replays_each_childs_replies(acp_agent, acp_env,
                                                                        tmp_path, server):
    workspace = os.path.realpath(tmp_path / "project")
    os.makedirs(workspace)
    for name, words in (("alpha.txt", "alpha words\n"), ("beta.txt", "beta words\n")):
        with open(os.path.join(workspace, name), "w") as fh:
            fh.write(words)
    server.responder = a.Router({
        None: [a.calls(a.agent_call(0, "call_a", "ALPHA read alpha.txt"),
                       a.agent_call(1, "call_b", "BETA read beta.txt")),
               a.says("Both read.")],
        "ALPHA": [a.calls(a.tool("read_file", "ca_1", path="alpha.txt")), a.says("ANSWER-A")],
        "BETA": [a.calls(a.tool("read_file", "cb_1", path="beta.txt")), a.says("ANSWER-B")],
    }, together=("ALPHA", "BETA"))
    with open(acp_env["TERM2ACP_CONFIG"], "w") as fh:
        fh.write(CONFIG)
    agent = acp_agent(args=["--provider", "openai", "--model", "gpt-4.1-mini"],
                      env={"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "x"})
    sid = agent.new_session(workspace)
    agent.prompt(sid, "read both files with two helpers", timeout=60)
    assert agent.close() == 0

    out = tmp_path / "exported"
    code, printed, err = cli(acp_env, "export", sid, "--format", "pytest", "-o", str(out))
    assert code == 0, err
    case = case_of(printed.strip())
    with open(os.path.join(case, "script.json")) as fh:
        script = json.load(fh)
    # six replies: the parent's two and each child's two, each named by its requester
    assert sorted(map(str, script["agents"])) == ["None", "None", "call_a", "call_a",
                                                  "call_b", "call_b"]

    env = {k: v for k, v in acp_env.items() if not k.startswith(("TERM2ACP_", "OPENAI_"))}
    env["PYTHONPATH"] = ROOT
    replay = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "-p", "no:anyio", "--import-mode=importlib", "-n", "0", str(out)],
                            env=env, cwd=out, capture_output=True, text=True, timeout=300)
    assert "1 passed" in replay.stdout, (replay.stdout + replay.stderr)[-3000:]

