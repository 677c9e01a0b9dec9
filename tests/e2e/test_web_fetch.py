"""web_fetch through the launcher, a fake model server making the calls and a web server on
loopback serving the pages, ACP v1 and v2: a loopback page after approval comes back as
Markdown, a link-local address is refused without asking, a redirect to another host asks
again, a rejection fetches nothing."""

import json

import pytest

from tests.support.toolcalls import finished_calls, model_server, start_agent, tool_results
from tests.support.web_fake import WebServer

PAGE = b"<html><body><h1>Install</h1><p>Run <code>make</code>.</p><script>x()</script></body></html>"


@pytest.mark.parametrize("protocol", [1, 2])
def test_web_fetch_asks_refuses_and_follows_redirects(acp_agent, workspace, protocol):
    other = WebServer({"/moved": (200, {"Content-Type": "text/plain"}, b"moved here")},
                      host="127.0.0.2").start()
    web = WebServer({"/doc": (200, {"Content-Type": "text/html"}, PAGE),
                     "/secret": (200, {"Content-Type": "text/plain"}, b"never read"),
                     "/go": (302, {"Location": other.url("/moved")}, b"")}).start()
    server = model_server([[("web_fetch", {"url": web.url("/doc")})],
                           [("web_fetch", {"url": "http://169.254.169.254/latest/"})],
                           [("web_fetch", {"url": web.url("/go")})],
                           [("web_fetch", {"url": web.url("/secret")})]])
    asked = []

    def answer(message):
        if message["method"] != "session/request_permission":
            return None
        asked.append(message["params"])
        option = "reject" if "/secret" in json.dumps(message["params"]) else "allow-once"
        options = [o["optionId"] for o in message["params"]["options"]]
        assert options == ["allow-once", "reject"]  # loopback: never for the session
        return {"outcome": {"outcome": "selected", "optionId": option}}
    try:
        agent = start_agent(acp_agent, server, protocol)
        sid = agent.new_session(workspace)
        _, updates, _ = agent.prompt(sid, "read the docs", timeout=40, on_request=answer)
        calls = finished_calls(updates)
        assert [c["status"] for c in calls] == ["completed", "failed", "completed", "failed"]
        assert all(c.get("kind", "fetch") == "fetch" for c in calls)
        results = tool_results(server)
        assert "# Install" in results["call_0"] and "`make`" in results["call_0"]
        assert "x()" not in results["call_0"]
        assert "cloud metadata address" in results["call_1"]
        assert results["call_2"].endswith("moved here")
        assert "did not allow" in results["call_3"]
        titles = [json.dumps(params) for params in asked]
        assert len(asked) == 4  # /doc, /go, the redirect to 127.0.0.2, /secret; not 169.254
        assert "redirected from" in titles[2] and "127.0.0.2" in titles[2]
        assert ("127.0.0.1:%d" % web.port, "/secret") not in web.requests
        assert [path for _, path in web.requests] == ["/doc", "/go"]
        assert agent.close() == 0
    finally:
        server.stop()
        web.stop()
        other.stop()


@pytest.mark.acp_process
def test_web_fetch_of_a_big_page_returns_its_beginning(acp_agent, workspace):
    rows = b"".join(b"<p>Paragraph %d of a big page.</p>\n" % n for n in range(150_000))
    big = b"<html><head><title>Big</title></head><body><h1>Start here</h1>" + rows + b"</body></html>"
    web = WebServer({"/big": (200, {"Content-Type": "text/html"}, big)}).start()
    server = model_server([[("web_fetch", {"url": web.url("/big"), "max_chars": 2000})]])
    try:
        agent = start_agent(acp_agent, server, 2)
        sid = agent.new_session(workspace)
        _, updates, _ = agent.prompt(sid, "read it", timeout=40, on_request=lambda m: {
            "outcome": {"outcome": "selected", "optionId": "allow-once"}})
        assert [c["status"] for c in finished_calls(updates)] == ["completed"]
        text = tool_results(server)["call_0"]
        assert len(big) > 5_000_000
        assert "# Start here" in text and "Paragraph 0 of a big page." in text
        assert "Paragraph 149999" not in text
        assert "[cut at 2000 characters of the first" in text and "of a longer page" in text
        assert agent.close() == 0
    finally:
        server.stop()
        web.stop()
