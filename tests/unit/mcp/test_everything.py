"""The client against a third-party server: @modelcontextprotocol/server-everything (npm,
installed in tests/mcp by .ci/run), over stdio."""

import pytest

from tests.support.mcp_servers import alive, everything_entry, everything_installed

pytestmark = pytest.mark.skipif(not everything_installed(),
                                reason="npm install in tests/mcp has not been run")


def test_server_everything_tools(make_hub):
    hub = make_hub(everything_entry())
    assert hub.wait_ready(30), hub.clients[0].error
    tools = hub.tools()
    assert {"mcp__everything__echo", "mcp__everything__get-sum"} <= set(tools)
    assert tools["mcp__everything__echo"].run({"message": "hello"}, None).text == "Echo: hello"
    assert "42" in tools["mcp__everything__get-sum"].run({"a": 40, "b": 2}, None).text
    assert tools["mcp__everything__echo"].read_only and tools["mcp__everything__echo"].kind == "read"
    assert tools["mcp__everything__toggle-simulated-logging"].kind == "other"
    for tool in tools.values():  # every schema is a cleaned object schema
        params = tool.spec()["parameters"]
        assert params["type"] == "object" and "$schema" not in params
    image = tools["mcp__everything__get-tiny-image"].run({}, None)
    assert "[image image/png" in image.text
    pid = hub.clients[0].transport.pid
    hub.close()
    assert not alive(pid)


def test_server_everything_over_streamable_http():
    from term2acp.mcp.config import from_acp
    from term2acp.mcp.hub import McpHub
    from tests.support.mcp_servers import EverythingHttp

    server = EverythingHttp()
    hub = McpHub([from_acp(server.entry())], "/")
    try:
        hub.start()
        assert hub.wait_ready(30), hub.clients[0].error
        assert hub.clients[0].transport.session_id
        tools = hub.tools()
        assert tools["mcp__everything__echo"].run({"message": "over http"}, None).text == \
            "Echo: over http"
        assert "42" in tools["mcp__everything__get-sum"].run({"a": 40, "b": 2}, None).text
    finally:
        hub.close()
        server.stop()


def test_server_everything_resources_prompts_structured_links_and_questions(make_hub):
    hub = make_hub(everything_entry())
    assert hub.wait_ready(30), hub.clients[0].error
    assert hub.clients[0].protocol_version == "2025-11-25"
    tools = hub.tools()
    listing = tools["mcp_list_resources"].run({"server": None}, None).text
    assert "demo://resource/static/document/architecture.md" in listing
    assert "demo://resource/dynamic/text/{resourceId}" in listing
    read = tools["mcp_read_resource"]
    text = read.run(read.load({"server": "everything", "arguments": {"resourceId": "3"},
                               "template": "demo://resource/dynamic/text/{resourceId}"}), None).text
    assert text.startswith("[demo://resource/dynamic/text/3]\nResource 3: ")
    commands = {c.name: c for c in hub.commands()}
    assert commands["everything:args-prompt"].hint == "city [state]"
    assert commands["everything:args-prompt"].run("Paris France") == \
        ("prompt", "What's weather in Paris, France?")
    weather = tools["mcp__everything__get-structured-content"].run({"location": "Chicago"}, None)
    assert weather.text.count("temperature") == 1  # the text block already is the structure
    links = tools["mcp__everything__get-resource-links"].run({"count": 2}, None).text
    assert "[resource link] Text Resource 2 demo://resource/dynamic/text/2 (text/plain)" in links
    asked = tools["mcp__everything__trigger-elicitation-request"].run({}, None).text
    assert '"action": "decline"' in asked  # no editor to ask: declined without asking
