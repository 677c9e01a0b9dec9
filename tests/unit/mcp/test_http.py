"""The client against our MCP server over streamable HTTP and the legacy HTTP+SSE transport.
The parametrized call and list_changed tests run the official-SDK server; the rest the fake."""

import logging

import pytest

from term2acp.mcp.client import FAILED, READY
from term2acp.tools.base import ToolError


@pytest.fixture(params=["http", "sse"])
def server(request, official_http_server, official_sse_server):
    return official_http_server if request.param == "http" else official_sse_server


def test_tools_call_and_is_error_over_http(make_hub, server):
    hub = make_hub(server.entry(headers={"X-Api-Key": "k-123"}))
    assert hub.wait_ready(30)
    assert hub.clients[0].state == READY
    tools = hub.tools()
    assert len(tools) == 16
    assert tools["mcp__web__add"].run({"a": 1, "b": 2}, None).text == "3"
    failed = tools["mcp__web__fail"].run({"message": "nope"}, None)
    assert failed.is_error and "nope" in failed.text


def test_list_changed_over_http(make_hub, server):
    hub = make_hub(server.entry())
    assert hub.wait_ready(30)
    hub.tools()["mcp__web__grow"].run({}, None)
    assert hub.changed.wait(10)
    assert hub.tools()["mcp__web__extra"].run({}, None).text == "extra here"


def test_streamable_http_keeps_the_session_id(make_hub, http_server):
    hub = make_hub(http_server.entry())
    assert hub.wait_ready(30)
    transport = hub.clients[0].transport
    assert transport.session_id and transport.protocol_version == "2025-11-25"


def test_headers_reach_the_server_but_not_the_log(make_hub, http_server, caplog):
    caplog.set_level(logging.DEBUG)
    hub = make_hub(http_server.entry(headers={"Authorization": "Bearer top-secret-token"}))
    assert hub.wait_ready(30)
    hub.tools()["mcp__web__echo"].run({"text": "x"}, None)
    hub.close()
    assert "top-secret-token" not in caplog.text
    assert "top-secret-token" not in repr(hub.clients[0].config)
    assert hub.describe() == [{"name": "web", "transport": "http", "url": http_server.url}]


def test_nothing_listening_fails_to_start(make_hub):
    import socket

    with socket.socket() as sock:  # a port that was free a moment ago
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    hub = make_hub({"type": "http", "name": "gone", "url": f"http://127.0.0.1:{port}/mcp?token=abc"})
    assert hub.wait_ready(30)
    assert hub.clients[0].state == FAILED
    (notice,) = hub.notices()
    assert "'gone' could not be started" in notice and "Connection refused" in notice
    assert "token=abc" not in notice


def test_a_server_that_goes_away_fails_calls_with_a_message(make_hub):
    from tests.support.mcp_servers import HttpServer

    server = HttpServer("http")
    try:
        hub = make_hub(server.entry())
        assert hub.wait_ready(30)
        tool = hub.tools()["mcp__web__echo"]
    finally:
        server.stop()
    with pytest.raises(ToolError, match="The MCP server web"):
        tool.run({"text": "anyone?"}, None)


def test_each_call_has_its_timeout(make_hub, http_server):
    hub = make_hub(http_server.entry(), call_timeout=1.0)
    assert hub.wait_ready(30)
    tools = hub.tools()
    assert tools["mcp__web__slow"].run({"seconds": 0.2}, None).text == "slept 0.2"
    with pytest.raises(ToolError, match="did not answer within 1 s, so the call was cancelled"):
        tools["mcp__web__slow"].run({"seconds": 30}, None)
    assert tools["mcp__web__echo"].run({"text": "x"}, None).text == "echo: x"


def test_a_server_only_the_proxy_resolves_is_reached_through_it(make_hub, http_server,
                                                                monkeypatch):
    from tests.support.proxy import ConnectProxy

    proxy = ConnectProxy(hosts={"mcp.invalid": "127.0.0.1"}).start()
    try:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)  # the providers' proxy settings
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        entry = dict(http_server.entry(), url=f"http://mcp.invalid:{http_server.port}/mcp")
        hub = make_hub(entry)
        assert hub.wait_ready(30) and hub.clients[0].state == READY
        assert hub.tools()["mcp__web__echo"].run({"text": "x"}, None).text == "echo: x"
        assert {target for target, _ in proxy.tunnels} == {f"mcp.invalid:{http_server.port}"}
    finally:
        proxy.stop()
