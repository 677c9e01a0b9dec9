"""Prompt content reaches the model: embedded resources, resource links, images; clean titles."""

import base64
import json
import os

import pytest

from tests.support import fake_llm as f

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64).decode()


@pytest.fixture
def server():
    srv = f.FakeLLMServer()
    srv.responder = lambda request: f.openai_sse(f.oa_text("ok"), f.oa_finish("stop"))
    srv.start()
    yield srv
    srv.stop()


def start(acp_agent, server, protocol, model="small-model"):
    return acp_agent(args=("--provider", "openai", "--model", model), protocol=protocol,
                     env={"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "sk-test-123456"})


def prompt(agent, sid, blocks, timeout=30):
    """Send content blocks; returns (response, updates) once the turn has ended (or failed)."""
    start = len(agent.messages)
    rid = agent.request_async("session/prompt", {"sessionId": sid, "prompt": blocks})
    if agent.protocol == 1:
        response = agent.wait_for(lambda m: m.get("id") == rid and "method" not in m, timeout)
    else:
        response = agent.wait_for(lambda m: m.get("id") == rid and "method" not in m, timeout)
        if "result" in response:
            agent.wait_update("state_update", state="idle", session_id=sid, timeout=timeout)
    updates = [m["params"]["update"] for m in agent.messages[start:]
               if m.get("method") == "session/update"]
    return response, updates


def user_text(request):
    message = [m for m in request.json["messages"] if m["role"] == "user"][-1]
    content = message["content"]
    return content if isinstance(content, str) else json.dumps(content)


@pytest.mark.parametrize("protocol", [1, 2])
def test_embedded_resource_reaches_the_model_and_the_title_stays_clean(
        acp_agent, workspace, server, protocol):
    agent = start(acp_agent, server, protocol)
    sid = agent.new_session(workspace)
    resource = {"type": "resource", "resource": {
        "uri": f"file://{workspace}/notes.py", "mimeType": "text/x-python",
        "text": "SECRET_SAUCE = 42\n" + "# filler\n" * 10}}
    response, updates = prompt(agent, sid, [
        {"type": "text", "text": "  Explain   this file\nplease"}, resource])
    assert "result" in response, response
    sent = user_text(server.requests[-1])
    assert f'<file uri="file://{workspace}/notes.py" mimeType="text/x-python">' in sent
    assert "SECRET_SAUCE = 42" in sent and "</file>" in sent
    titles = [u["title"] for u in updates if u["sessionUpdate"] == "session_info_update"
              and u.get("title")]
    assert titles == ["Explain this file please"]
    listed = agent.request("session/list", {})["result"]["sessions"]
    assert listed[0]["title"] == "Explain this file please"
    assert agent.close() == 0


@pytest.mark.parametrize("protocol", [1, 2])
def test_binary_embedded_resource_is_refused(acp_agent, workspace, server, protocol):
    agent = start(acp_agent, server, protocol)
    sid = agent.new_session(workspace)
    response, _ = prompt(agent, sid, [{"type": "text", "text": "look"}, {
        "type": "resource", "resource": {"uri": "file:///x.bin", "blob": "AAEC"}}])
    assert response["error"]["code"] == -32602
    assert "binary" in response["error"]["message"]
    assert not server.requests
    assert agent.close() == 0


@pytest.mark.parametrize("protocol", [1, 2])
def test_resource_link_inside_the_root_is_attached(acp_agent, workspace, tmp_path, server,
                                                   protocol):
    with open(f"{workspace}/inside.txt", "w") as fh:
        fh.write("INSIDE CONTENT\n")
    outside = tmp_path / "outside.txt"
    outside.write_text("OUTSIDE CONTENT\n")
    os.symlink(outside, f"{workspace}/sneaky.txt")
    agent = start(acp_agent, server, protocol)
    sid = agent.new_session(workspace)
    response, _ = prompt(agent, sid, [
        {"type": "text", "text": "compare these"},
        {"type": "resource_link", "name": "inside.txt", "uri": f"file://{workspace}/inside.txt"},
        {"type": "resource_link", "name": "sneaky.txt", "uri": f"file://{workspace}/sneaky.txt"},
        {"type": "resource_link", "name": "outside.txt", "uri": f"file://{outside}"}])
    assert "result" in response, response
    sent = user_text(server.requests[-1])
    assert "INSIDE CONTENT" in sent
    assert "OUTSIDE CONTENT" not in sent
    assert sent.count("outside the workspace: not attached") == 2
    assert agent.close() == 0


def test_image_passes_to_an_image_model(acp_agent, workspace, server):
    agent = acp_agent(args=("--provider", "openai", "--model", "gpt-4o"), initialize=False,
                      env={"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "sk-test-123456"})
    assert agent.initialize()["capabilities"]["session"]["prompt"] == {
        "embeddedContext": {}, "image": {}}
    sid = agent.new_session(workspace)
    response, _ = prompt(agent, sid, [{"type": "text", "text": "what is this?"},
                                      {"type": "image", "mimeType": "image/png", "data": PNG}])
    assert "result" in response, response
    content = [m for m in server.requests[-1].json["messages"] if m["role"] == "user"][-1]["content"]
    assert content[0] == {"type": "text", "text": "what is this?"}
    assert content[1]["image_url"]["url"] == f"data:image/png;base64,{PNG}"
    assert agent.close() == 0


@pytest.mark.parametrize("protocol", [1, 2])
def test_image_is_refused_for_a_model_without_images(acp_agent, workspace, server, protocol):
    agent = acp_agent(args=("--provider", "openai", "--model", "small-model"), protocol=protocol,
                      initialize=False,
                      env={"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "sk-test-123456"})
    answer = agent.initialize()
    prompt_caps = answer["agentCapabilities"]["promptCapabilities"] if protocol == 1 \
        else answer["capabilities"]["session"]["prompt"]
    assert "image" not in prompt_caps or not prompt_caps["image"]
    sid = agent.new_session(workspace)
    response, _ = prompt(agent, sid, [{"type": "text", "text": "what is this?"},
                                      {"type": "image", "mimeType": "image/png", "data": PNG}])
    assert response["error"]["code"] == -32602
    assert "does not accept images" in response["error"]["message"]
    assert not server.requests
    assert agent.close() == 0


def test_config_images_true_makes_a_custom_model_take_images(acp_agent, workspace, tmp_path, server):
    (tmp_path / "config.toml").write_text("images = true\n")
    agent = start(acp_agent, server, 1)
    sid = agent.new_session(workspace)
    response, _ = prompt(agent, sid, [{"type": "image", "mimeType": "image/png", "data": PNG}])
    assert response["result"]["stopReason"] == "end_turn"
    assert "image_url" in json.dumps(server.requests[-1].json["messages"])
    assert agent.close() == 0


@pytest.mark.parametrize("model, sees", [("gpt-4o", True), ("small-model", False)])
def test_read_file_on_an_image_returns_it_to_an_image_model(acp_agent, workspace, model, sees):
    with open(f"{workspace}/pic.png", "wb") as fh:
        fh.write(base64.b64decode(PNG))
    srv = f.FakeLLMServer().start()
    try:
        srv.enqueue(f.openai_sse(f.oa_tool(0, "call_1", "read_file", '{"path": "pic.png"}'),
                                 f.oa_finish("tool_calls")),
                    f.openai_sse(f.oa_text("A tiny picture."), f.oa_finish("stop")))
        agent = acp_agent(args=("--provider", "openai", "--model", model),
                          env={"OPENAI_BASE_URL": srv.openai_url, "OPENAI_API_KEY": "sk-t-123456"})
        sid = agent.new_session(workspace)
        _, updates, idle = agent.prompt(sid, "look at pic.png", timeout=30)
        assert idle["params"]["update"]["stopReason"] == "end_turn"
        second = srv.wait_requests(2)[1].json["messages"]
        tool = [m for m in second if m["role"] == "tool"][0]
        images = [p for m in second if m["role"] == "user" and isinstance(m["content"], list)
                  for p in m["content"] if p.get("type") == "image_url"]
        if sees:
            assert "is attached for you to look at" in tool["content"]
            assert images[0]["image_url"]["url"] == f"data:image/png;base64,{PNG}"
        else:
            assert "binary file" in tool["content"] and not images
        assert agent.close() == 0
    finally:
        srv.stop()
