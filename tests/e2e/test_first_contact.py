"""First contact: errors name their real cause, and the offline demo model says what it is.
An unreachable Anthropic endpoint names ANTHROPIC_BASE_URL (not OPENAI_BASE_URL);
TERM2ACP_LOCAL_MODEL naming a missing file says that file is missing; the offline model's
answer says it is a small demo model and how to connect a real one."""

import socket

import pytest


def closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("protocol", [2, 1])
def test_an_unreachable_anthropic_endpoint_names_anthropic_base_url(acp_agent, acp_workspace,
                                                                    protocol):
    agent = acp_agent(args=("--provider", "anthropic", "--model", "claude-sonnet-4-5"),
                      protocol=protocol,
                      env={"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{closed_port()}",
                           "ANTHROPIC_API_KEY": "sk-ant-test-123456"})
    sid = agent.new_session(acp_workspace)
    response, updates, _ = agent.prompt(sid, "hi", timeout=60)
    if protocol == 1:
        told = response["error"]["message"]
    else:
        told = "".join(u["content"]["text"] for u in updates
                       if u["sessionUpdate"] == "agent_message_chunk")
    assert "ANTHROPIC_BASE_URL" in told and "OPENAI_BASE_URL" not in told, told
    agent.close()


def test_a_local_model_setting_naming_a_missing_file_says_so(acp_agent, acp_workspace, tmp_path):
    missing = tmp_path / "nowhere.gguf"
    agent = acp_agent(args=("--provider", "local"), env={"TERM2ACP_LOCAL_MODEL": str(missing)})
    sid = agent.new_session(acp_workspace)
    answer = agent.request("session/prompt", {"sessionId": sid,
                                              "prompt": [{"type": "text", "text": "hi"}]})
    message = answer["error"]["message"]
    assert f"TERM2ACP_LOCAL_MODEL names {missing}, which does not exist" in message, message
    agent.close()
