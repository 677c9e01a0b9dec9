"""pytest plugin (entry point ``pytest11: term2acp``): fixtures for agent transcript tests.

Fixtures:

* ``acp_workspace``: a temporary project directory (canonical path);
* ``acp_env``: an environment with a private ``TERM2ACP_HOME`` and no provider keys;
* ``acp_agent(turns=None, script=None, args=(), env=None, initialize=True, protocol=2,
  cwd=None, process=None)``: a real ``term2-acp`` (where it runs: below), with the
  scripted provider when ``turns`` (a list of model turns) or ``script`` (a file) is
  given; every message it sends is validated against the ACP schema of ``protocol`` (2,
  or 1 for the v1 face with Zed's ``initialize``), and it is closed (EOF, exit 0, no
  schema errors) after the test;
* ``acp_transcript(path)``: play a recorded transcript and compare; run pytest with
  ``--update-transcripts`` to re-record instead (review the diff before committing).

Where the agent runs: in the test process, over a socket pair (term2acp/testing/inprocess.py:
the same server, no interpreter start per agent) when pytest runs under gevent's monkey
patching (``python -m gevent.monkey --module pytest``) and nothing about the agent needs a
process of its own (a working directory, a differing ``HOME``/``PATH``/proxy/CA variable,
``--help``-like arguments); else as a process (``bin/term2-acp``). A plain ``pytest`` run
gets processes only: the same tests pass either way, slower. ``acp_agent(...,
process=True)`` or the ``@pytest.mark.acp_process`` marker ask for processes (a signal, a
crash with ``kill()``, the process's own stdio or stderr).

An integrator's test::

    def test_my_tool(acp_agent, acp_workspace):
        agent = acp_agent(turns=[[{"tool_call": {"name": "word_count",
                                                 "arguments": {"path": "a.txt"}}}],
                                 [{"text": "done"}]])
        sid = agent.new_session(acp_workspace)
        response, updates, idle = agent.prompt(sid, "count words")
        assert idle["params"]["update"]["stopReason"] == "end_turn"
"""

import json
import os
import shlex
import sys

import pytest

from term2acp.testing.harness import AgentProcess
from term2acp.testing.transcript import TranscriptRun

SCRUB = ("OPENAI_", "ANTHROPIC_", "TERM2ACP_")


def pytest_addoption(parser):
    group = parser.getgroup("term2acp")
    group.addoption("--update-transcripts", action="store_true", default=False,
                    help="re-record ACP transcripts instead of comparing them")


def pytest_configure(config):
    _patched_xdist_workers(config)
    config.addinivalue_line("markers", "acp_process: this test's acp_agent agents run as "
                            "processes of their own (bin/term2-acp), never in the test process")


def _patched_xdist_workers(config):
    """A run under gevent's monkey patching (``python -m gevent.monkey --module pytest``)
    starts its local pytest-xdist workers patched too, through xdist_worker.py."""
    from gevent import monkey

    specs = getattr(config.option, "tx", None)
    if not specs or not monkey.is_module_patched("socket"):
        return
    launcher = os.path.join(os.path.dirname(os.path.abspath(__file__)), "xdist_worker.py")
    python = f"python={shlex.quote(sys.executable)} {shlex.quote(launcher)}"
    config.option.tx = [f"popen//{python}" if spec == "popen" else spec for spec in specs]


@pytest.fixture
def acp_workspace(tmp_path):
    path = tmp_path / "work"
    path.mkdir()
    return os.path.realpath(path)


@pytest.fixture
def acp_env(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(SCRUB)}
    home = tmp_path / "term2acp-home"
    home.mkdir(mode=0o700, exist_ok=True)  # as the agent makes its data folder
    env.update(TERM2ACP_HOME=str(home), TERM2ACP_CONFIG=str(tmp_path / "config.toml"),
               XDG_CONFIG_HOME=str(tmp_path / "xdg-config"),
               TERM2ACP_LSP="off",  # no language server a machine happens to have
               # nor the commands and skills its user keeps for other agents (~/.claude, ...)
               TERM2ACP_PEERS_HOME=str(tmp_path / "peers-home"))
    return env


@pytest.fixture
def acp_agent(request, acp_env, tmp_path):
    started = []
    own_process = True if request.node.get_closest_marker("acp_process") else None

    def start(turns=None, script=None, args=(), env=None, initialize=True, protocol=2,
              cwd=None, process=None, **script_extra):
        full = dict(acp_env, **(env or {}))
        args = list(args)
        if turns is not None:
            script = tmp_path / f"script-{len(started)}.json"
            script.write_text(json.dumps(dict(script_extra, turns=turns)))
        if script is not None:
            full["TERM2ACP_SCRIPT"] = str(script)
            if "--provider" not in args:
                args = ["--provider", "scripted"] + args
        agent = AgentProcess(args, env=full, protocol=protocol, cwd=cwd,
                             process=own_process if process is None else process).start()
        started.append(agent)
        if initialize:
            agent.initialize()
        return agent

    yield start
    problems = []
    for agent in started:
        try:
            if agent.proc.poll() is None:
                agent.close()
            elif agent.schema_errors:
                problems += agent.schema_errors
        finally:
            agent.dispose()
    assert not problems, "schema errors:\n" + "\n".join(problems[:20])


@pytest.fixture
def acp_transcript(request, acp_workspace, acp_env, tmp_path):
    def play(path):
        run = TranscriptRun(str(path), acp_workspace, acp_env, str(tmp_path))
        received = run.run()
        if request.config.getoption("--update-transcripts"):
            run.rewrite()
            return received
        expected = run.expected()
        assert received == expected, _diff(expected, received)
        return received
    return play


def _diff(expected, received):
    import difflib

    return "transcript differs (rerun with --update-transcripts to re-record):\n" + "\n".join(
        difflib.unified_diff(expected, received, "recorded", "received", lineterm="", n=1))
