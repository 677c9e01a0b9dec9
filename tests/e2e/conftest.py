"""Fixtures for the end-to-end tests."""

import pytest

from tests.support import fake_llm
from tests.support.scripts import write_script


@pytest.fixture
def started(spawn, workspace, tmp_path):
    """``started(turns, env=None, **script_extra)``: an initialized agent on a scripted model
    and a new session in ``workspace``; returns ``(agent, session id)``."""
    def _start(turns, env=None, **extra):
        agent = spawn(script=write_script(tmp_path, turns, **extra), env=env)
        agent.initialize()
        return agent, agent.new_session(workspace)
    return _start


@pytest.fixture
def server():
    """A fake OpenAI/Anthropic server on loopback (tests/support/fake_llm.py); a test
    module may define its own ``server`` with a script or a responder."""
    srv = fake_llm.FakeLLMServer()
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def configure(acp_env):
    """``configure(text)`` writes the agents' config file (the kit's TERM2ACP_CONFIG)."""
    def write(text):
        with open(acp_env["TERM2ACP_CONFIG"], "w") as fh:
            fh.write(text)
    return write
