"""web_fetch against a real server on loopback: what asks, what is refused, redirects,
content types and bounds."""

import gzip
import json
import re

import pytest

from term2acp.core.approvals import WEB_HOST, WEB_PRIVATE
from term2acp.tools import webpage
from term2acp.tools.base import ToolError
from term2acp.tools.web_fetch import Place, WebFetchTool, check_url, request_for
from tests.support.web_fake import WebServer

HTML = (b"<html><head><title>T</title><script>alert(1)</script></head><body>"
        b"<h1>Guide</h1><p>Use <code>run()</code>, see <a href='/next'>next</a>.</p>"
        b"<p>" + b"More words. " * 30 + b"</p></body></html>")


@pytest.fixture
def web():
    server = WebServer({
        "/page": (200, {"Content-Type": "text/html; charset=utf-8"}, HTML),
        "/data": (200, {"Content-Type": "application/json"}, json.dumps({"a": 1}).encode()),
        "/gz": (200, {"Content-Type": "text/plain", "Content-Encoding": "gzip"},
                gzip.compress(b"zipped text")),
        "/bin": (200, {"Content-Type": "image/png"}, b"\x89PNG\r\n\x1a\n\0\0"),
        "/gone": (404, {"Content-Type": "text/plain"}, b"no such page"),
        "/same": (302, {"Location": "/page"}, b""),
        "/loop": (302, {"Location": "/loop"}, b""),
    }).start()
    yield server
    server.stop()


def fetch(ctx, url, approve=None, **extra):
    tool = WebFetchTool()
    args = tool.load({"url": url, **extra})
    plan = tool.approval(args, ctx)
    assert plan.request is not None and plan.request.variant == WEB_PRIVATE  # loopback
    ctx._approve = approve
    return tool.run(args, ctx, plan).text


def test_html_becomes_markdown_and_text_and_json_stay(ctx, web):
    text = fetch(ctx, web.url("/page"))
    assert "# Guide" in text and "`run()`" in text and "alert" not in text
    assert f"[next](http://127.0.0.1:{web.port}/next)" in text
    assert fetch(ctx, web.url("/data")).endswith('{"a": 1}')
    assert fetch(ctx, web.url("/gz")).endswith("zipped text")


def test_binary_and_errors_and_cuts_are_clear(ctx, web):
    with pytest.raises(ToolError, match="image/png content .* which web_fetch does not show"):
        fetch(ctx, web.url("/bin"))
    with pytest.raises(ToolError, match="answered HTTP 404. The page says: no such page"):
        fetch(ctx, web.url("/gone"))
    text = fetch(ctx, web.url("/data"), max_chars=100)
    assert "[cut at" not in text
    long = fetch(ctx, web.url("/page"), max_chars=100)
    assert "[cut at 100 of" in long


def test_a_same_origin_redirect_follows_and_another_host_asks(ctx, web):
    assert "# Guide" in fetch(ctx, web.url("/same"))  # nobody asked again
    other = WebServer({"/page": (200, {"Content-Type": "text/plain"}, b"other host")},
                      host="127.0.0.2").start()
    try:
        web.pages["/away"] = (302, {"Location": other.url("/page")}, b"")
        asked = []
        with pytest.raises(ToolError, match="which the user did not allow; nothing was fetched"):
            fetch(ctx, web.url("/away"), approve=lambda request: asked.append(request) or False)
        assert [r.variant for r in asked] == [WEB_PRIVATE]
        assert other.requests == []
        assert fetch(ctx, web.url("/away"), approve=lambda request: True).endswith("other host")
    finally:
        other.stop()
    with pytest.raises(ToolError, match="redirected more than 5 times"):
        fetch(ctx, web.url("/loop"))


@pytest.mark.parametrize("url, needle", [
    ("http://169.254.169.254/latest/meta-data/", "cloud metadata address"),
    ("http://169.254.1.1/", "a link-local address"),
    ("http://[fe80::1]/", "a link-local address"),
    ("http://metadata.google.internal/", "cloud metadata service"),
    ("http://[::ffff:169.254.169.254]/", "cloud metadata address"),
    ("ftp://example.com/", r"not an http\(s\) URL"),
    ("http://user:pw@example.com/", "user name or password"),
])
def test_refused_before_anything_is_asked(url, needle):
    with pytest.raises(ToolError, match=needle):
        check_url(url)


def test_private_asks_every_time_and_public_hosts_can_be_granted(ctx):
    private = Place("http://10.0.0.1/", "10.0.0.1", ("http", "10.0.0.1", 80), "10.0.0.1", True)
    public = Place("https://docs.example/", "docs.example", ("https", "docs.example", 443),
                   "93.184.216.34", False)
    ctx.access.allow_tool(("web", "10.0.0.1"))
    assert request_for(private, ctx).variant == WEB_PRIVATE  # never covered by a grant
    request = request_for(public, ctx)
    assert request.variant == WEB_HOST and request.grant == ("web", "docs.example")
    ctx.access.allow_tool(request.grant)
    assert request_for(public, ctx) is None
    ctx.mode = "ask"
    assert request_for(public, ctx).variant == WEB_HOST  # ask mode asks every time


def test_only_a_prefix_of_a_long_page_is_read_and_converted(ctx, web):
    rows = b"".join(b"<p>Row %d of the page.</p>" % n for n in range(20000))
    web.pages["/long"] = (200, {"Content-Type": "text/html"},
                          b"<html><head><title>T</title><style>" + b"x{}" * 5000 +
                          b"</style></head><body>" + rows + b"</body></html>")
    web.pages["/long.gz"] = (200, {"Content-Type": "text/plain", "Content-Encoding": "gzip"},
                             gzip.compress(b"line of text\n" * 500_000))
    text = fetch(ctx, web.url("/long"), max_chars=1000)
    assert "Row 0 of the page." in text and "Row 19999" not in text
    read = re.search(r"\[cut at 1000 characters of the first (\d+) bytes of a longer page", text)
    assert 15_000 + 8_000 <= int(read.group(1)) < 15_000 + 12_000  # the head, 8 per char
    zipped = fetch(ctx, web.url("/long.gz"), max_chars=500)
    assert zipped.count("line of text") == 500 // 13  # 38 whole lines, then a cut one
    assert "of the first 4000 bytes of a longer page" in zipped  # decoded, 8 per character


def test_a_name_only_the_proxy_resolves_goes_through_it_as_a_public_host(ctx, web, monkeypatch):
    from tests.support.proxy import ConnectProxy

    proxy = ConnectProxy(hosts={"docs.invalid": "127.0.0.1"}).start()
    try:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        tool = WebFetchTool()
        args = tool.load({"url": f"http://docs.invalid:{web.port}/data"})
        plan = tool.approval(args, ctx)
        assert plan.request.variant == WEB_HOST and plan.request.grant == ("web", "docs.invalid")
        assert tool.run(args, ctx, plan).text.endswith('{"a": 1}')
        assert [target for target, _ in proxy.tunnels] == [f"docs.invalid:{web.port}"]
    finally:
        proxy.stop()
