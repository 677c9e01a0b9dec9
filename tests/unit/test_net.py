"""The one network path (term2acp/net/) as each caller meets it: a proxy setting it cannot
use fails every caller in that caller's own words, before anything is sent; a checked
address pins the connection; the SSE decoder's bound is the caller's."""

import io
import re

import pytest
from gevent.server import StreamServer

from term2acp.mcp.dial import dial
from term2acp.mcp.rpc import ServerGone
from term2acp.net import sse
from term2acp.net.address import Target
from term2acp.net.connection import connection
from term2acp.net.errors import EventTooLarge
from term2acp.providers import gguf
from term2acp.providers.errors import ConnectionFailed
from term2acp.providers.http import HTTPClient
from term2acp.tools.base import ToolError
from term2acp.tools.web_fetch import WebFetchTool
from tests.support.toolctx import tool_context, workspace

PROXY_ENV = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy",
             "NO_PROXY", "no_proxy")


@pytest.fixture
def socks_proxy(monkeypatch):
    for name in PROXY_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "socks5://proxy.invalid:1080")


def test_an_unusable_proxy_fails_each_caller_in_its_own_words(socks_proxy, tmp_path):
    said = re.escape("unsupported proxy URL socks5://proxy.invalid: only http:// proxies (CONNECT)")
    client = HTTPClient("https://api.example.com/v1", {}, "openai", "OPENAI_API_KEY", None)
    with pytest.raises(ConnectionFailed, match=f"^openai: {said}"):
        list(client.stream("/chat/completions", {}))  # not retried: nothing can change
    with pytest.raises(ServerGone, match=said):
        dial("https://mcp.example.com/mcp", 5)
    tool = WebFetchTool()
    ctx = tool_context(workspace(tmp_path), tmp_path)
    args = tool.load({"url": "https://93.184.216.34/docs"})  # a literal: no lookup
    where = re.escape("https://93.184.216.34/docs")
    with pytest.raises(ToolError, match=f"could not fetch {where}: {said}"):
        tool.run(args, ctx, tool.approval(args, ctx))
    with pytest.raises(gguf.InstallError, match=f"cannot download https://files.example.com/m.whl: "
                                                f"{said}"):
        gguf.install({"XDG_DATA_HOME": str(tmp_path)}, url="https://files.example.com/m.whl",
                     out=io.StringIO())


def test_a_checked_address_pins_the_connection_whatever_the_name():
    seen = []

    def answer(sock, _address):
        seen.append(sock.recv(65536))
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        sock.close()

    server = StreamServer(("127.0.0.1", 0), answer)
    server.start()
    try:
        target = Target(f"http://docs.invalid:{server.server_port}/")  # resolves nowhere
        conn, proxy = connection(target, 5, address="127.0.0.1")
        try:
            conn.request("GET", "/page")
            assert proxy is None and conn.getresponse().read() == b"ok"
        finally:
            conn.close()
        assert seen[0].startswith(b"GET /page HTTP/1.1\r\n")
        assert f"Host: docs.invalid:{server.server_port}".encode() in seen[0]
    finally:
        server.stop()


def test_the_sse_decoder_bound_is_the_callers():
    with pytest.raises(EventTooLarge, match="an event exceeds 16 bytes") as info:
        sse.SSEDecoder(limit=16).feed(b"data: " + b"x" * 10 + b"\ndata: " + b"y" * 10 + b"\n")
    assert info.value.limit == 16 and isinstance(info.value, ValueError)
    assert sse.SSEDecoder(limit=16).feed(b"data: " + b"x" * 16 + b"\n\n") == [(None, "x" * 16)]
    with pytest.raises(EventTooLarge, match="an event line exceeds 16 MiB"):
        sse.SSEDecoder().feed(b"data: " + b"x" * (16 << 20))
