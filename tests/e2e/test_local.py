"""The offline default over the real launcher: the bundled SmolLM2 model answers."""

import os

import pytest

from tests.unit.providers.test_local import _available

pytestmark = pytest.mark.skipif(not _available() and not os.environ.get("CI"),
                                reason="pip install '.[local]' to run the bundled model")


def test_local_model_is_the_default_and_answers(spawn, workspace):
    agent = spawn()  # no provider flag, no keys: the offline default
    agent.initialize()
    sid = agent.new_session(workspace)
    _, updates, idle = agent.prompt(sid, "Say hello in one short sentence.", timeout=120)
    assert idle["params"]["update"]["stopReason"] in ("end_turn", "max_tokens"), idle
    text = "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk")
    assert text.strip()
    assert agent.close() == 0


def test_local_model_turn_can_be_cancelled(spawn, workspace):
    agent = spawn("--provider", "local")
    agent.initialize()
    sid = agent.new_session(workspace)
    agent.request_async("session/prompt", {"sessionId": sid, "prompt": [
        {"type": "text", "text": "Write a very long story about the sea."}]})
    agent.wait_update("agent_message_chunk", timeout=120)
    agent.notify("session/cancel", {"sessionId": sid})
    idle = agent.wait_update(state="idle", timeout=30)
    assert idle["stopReason"] == "cancelled"
    assert agent.close() == 0
