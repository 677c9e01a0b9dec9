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
