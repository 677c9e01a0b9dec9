"""MCP beyond tools, through the real agent, against the fake server of
tests/support/mcp_fake.py with its features on (mcp_fake_features.py) over streamable HTTP,
speaking only 2025-06-18 (it refuses a request without that MCP-Protocol-Version): tools
added after list_changed, structured content and links, resources and templates, prompts
as slash commands, elicitation forwarded to the editor or declined, sampling refused."""

import json

import pytest

from term2acp.testing.harness import initialize_with
from tests.e2e.test_mcp import call, final, history, mcp_agent, selected, text_of  # noqa: F401
from tests.support.mcp_servers import HttpServer

FORM = {"elicitation": {"form": {}}}


@pytest.fixture
def features():
    server = HttpServer("http", env={"MCP_FAKE_FEATURES": "1", "MCP_FAKE_VERSIONS": "2025-06-18"})
    yield server
    server.stop()


def allow(message):
    return selected("allow-tool-session")


def commands_with(agent, sid, name, timeout=30):
    """The session's latest commands update once it lists ``name`` (the servers connect in
    the background: the first update may or may not have their commands)."""
    while True:
        updates = [m["params"]["update"] for m in agent.messages if m.get("method") ==
                   "session/update" and m["params"]["sessionId"] == sid and
                   m["params"]["update"]["sessionUpdate"] == "available_commands_update"]
        listed = {c["name"]: c for c in updates[-1]["availableCommands"]} if updates else {}
        if name in listed:
            return listed
        agent.wait_update("available_commands_update", session_id=sid, timeout=timeout)


def tool_results(home, sid):
    return [m["content"] for m in history(home, sid) if m["role"] == "tool"]


@pytest.mark.parametrize("protocol", [2, 1])
def test_an_old_server_its_new_tools_structured_results_and_resources(mcp_agent, features,
                                                                      home, protocol):
    turns = [[call("mcp__web__grow")], [call("mcp__web__extra")],
             [call("mcp__web__report")],
             [call("mcp_list_resources")],
             [call("mcp_read_resource", server="web", uri="memo://notes")],
             [call("mcp_read_resource", server="web", template="memo://notes/{topic}",
                   arguments={"topic": "q3 plans"})],
             [{"text": "done"}]]
    agent, sid, _ = mcp_agent(turns, [features.entry()], protocol)
    asked = []
    _, updates, _ = agent.prompt(sid, "go", timeout=60,
                                 on_request=lambda m: asked.append(m) or allow(m))
    results = tool_results(home, sid)
    assert results[:2] == ["grown", "extra here"]  # offered after tools/list_changed
    report = results[2]
    assert "report ready" in report and '"revenue": 42' in report
    assert "memo://notes/q3" in report and "The Q3 note." in report
    listing = results[3]
    assert "memo://notes Team notes (text/plain)" in listing and "memo://notes/{topic}" in listing
    assert results[4] == "[memo://notes]\nnotes: ship on Friday"
    assert results[5] == "[memo://notes/q3%20plans]\nnote about q3 plans"
    titles = [m["params"].get("toolCall", m["params"].get("subject", {}).get("toolCall", {}))
              .get("title") for m in asked]
    reads = [t for t in titles if t and t.startswith("Read memo://")]
    assert reads == ["Read memo://notes from the MCP server web"]  # once for the server
    agent.close()


@pytest.mark.parametrize("protocol", [2, 1])
def test_prompts_are_slash_commands_refreshed_on_list_changed(mcp_agent, features, home,
                                                              protocol):
    turns = [[{"text": "reviewed"}], [call("mcp__web__more_prompts")], [{"text": "ok"}],
             [{"text": "later done"}]]
    agent, sid, _ = mcp_agent(turns, [features.entry()], protocol)
    listed = commands_with(agent, sid, "web:review")
    review = listed["web:review"]
    assert review["description"] == "Review a file with a focus."
    hint = review["input"]["hint"]
    assert hint == "file [focus]"
    assert "mcp-login" not in listed  # nothing here signs in
    agent.prompt(sid, "/web:review main.py focus=speed", timeout=60)
    users = [m["content"] for m in history(home, sid) if m["role"] == "user"]
    assert users[-1] == "Please review main.py, focus on speed."

    agent.prompt(sid, "more", timeout=60, on_request=allow)
    assert "web:later" in commands_with(agent, sid, "web:later")
    agent.prompt(sid, "/web:later", timeout=60)
    assert [m["content"] for m in history(home, sid) if m["role"] == "user"][-1] == \
        "The later prompt."
    agent.close()


@pytest.mark.parametrize("protocol, capable", [(2, True), (2, False), (1, True)])
def test_elicitation_reaches_a_capable_editor_and_sampling_is_refused(
        mcp_agent, acp_agent, features, home, workspace, protocol, capable):
    turns = [[call("mcp__web__ask")], [call("mcp__web__sample")], [{"text": "done"}]]
    agent = acp_agent(turns=turns, env={"TERM2ACP_HOME": str(home)}, protocol=protocol,
                      initialize=False)
    agent.initialize_params = initialize_with(protocol, FORM if capable else {})
    agent.initialize()
    sid = agent.new_session(workspace, mcp_servers=[features.entry()])
    questions = []

    def answer(message):
        if message["method"] == "elicitation/create":
            questions.append(message["params"])
            return {"action": "accept", "content": {"colour": "red"}}
        return allow(message)
    _, updates, _ = agent.prompt(sid, "ask", timeout=60, on_request=answer)
    asked, sampled = tool_results(home, sid)
    if capable:
        (question,) = questions
        assert question["mode"] == "form" and question["message"] == "Which colour?"
        assert question["sessionId"] == sid and question["toolCallId"]
        assert question["requestedSchema"]["properties"]["colour"]["enum"] == ["red", "blue"]
        assert json.loads(asked.split(": ", 1)[1]) == {"action": "accept",
                                                       "content": {"colour": "red"}}
    else:
        assert questions == []
        assert json.loads(asked.split(": ", 1)[1]) == {"action": "decline"}
    assert sampled == "sampling refused: -32601 Method not found: sampling/createMessage"
    agent.close()
