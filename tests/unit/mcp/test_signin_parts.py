"""The small parts of MCP sign-in, resources and prompts that need no server: challenge
parsing, the token files, URI templates, prompt arguments, what reaches the model of a
structured result."""

import os
import stat

from term2acp.mcp import tokens
from term2acp.mcp.adapter import to_result
from term2acp.mcp.oauth import _covers, _well_known, challenge_params
from term2acp.mcp.prompts import fill
from term2acp.mcp.resources import expand


def test_challenge_parameters_quoted_or_not():
    header = 'Bearer error="invalid_token", resource_metadata="https://a.example/.well-known/x", scope=files:read'
    assert challenge_params(header) == {"error": "invalid_token", "scope": "files:read",
                                        "resource_metadata": "https://a.example/.well-known/x"}
    assert challenge_params('Basic realm="x"') == {}


def test_well_known_places_in_the_spec_order():
    assert _well_known("https://as.example/tenant", "oauth-authorization-server") == [
        "https://as.example/.well-known/oauth-authorization-server/tenant"]
    assert _well_known("https://as.example/tenant", "openid-configuration", suffix_too=True) == [
        "https://as.example/.well-known/openid-configuration/tenant",
        "https://as.example/tenant/.well-known/openid-configuration"]
    assert _well_known("https://mcp.example/v1/mcp", "oauth-protected-resource") == [
        "https://mcp.example/.well-known/oauth-protected-resource/v1/mcp",
        "https://mcp.example/.well-known/oauth-protected-resource"]


def test_protected_resource_must_cover_the_server():
    assert _covers("https://mcp.example/", "https://MCP.example/mcp")
    assert _covers("https://mcp.example/mcp", "https://mcp.example/mcp/")
    assert not _covers("https://mcp.example/other", "https://mcp.example/mcp")
    assert not _covers("https://evil.example/", "https://mcp.example/mcp")


def test_token_files_are_private_atomic_and_keyed_by_url(tmp_path):
    url = "https://mcp.example/mcp"
    tokens.save(str(tmp_path), url, {"token": {"access_token": "at-1"}})
    tokens.save(str(tmp_path), url, {"token": {"access_token": "at-2"}})
    (path,) = (tmp_path / "mcp-auth").iterdir()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "mcp-auth").stat().st_mode) == 0o700
    assert tokens.load(str(tmp_path), url)["token"]["access_token"] == "at-2"
    assert tokens.load(str(tmp_path), url + "/other") is None
    path.write_text("{not json")
    assert tokens.load(str(tmp_path), url) is None  # unreadable: no sign-in
    assert tokens.delete(str(tmp_path), url) and not tokens.delete(str(tmp_path), url)
    assert os.listdir(tmp_path / "mcp-auth") == []  # no temp file left behind


def test_uri_templates():
    values = {"topic": "q3 plans", "path": "a/b", "x": "1", "y": "2"}
    assert expand("memo://notes/{topic}", values) == "memo://notes/q3%20plans"
    assert expand("file:///{+path}", values) == "file:///a/b"
    assert expand("api://items{/topic}{?x,y,missing}", values) == "api://items/q3%20plans?x=1&y=2"


def test_prompt_arguments_in_order_by_name_and_the_rest():
    args = [{"name": "file", "required": True}, {"name": "focus"}]
    assert fill(args, "main.py speed and size") == ({"file": "main.py", "focus": "speed and size"}, [])
    assert fill(args, "focus=speed main.py") == ({"focus": "speed", "file": "main.py"}, [])
    assert fill(args, "") == ({}, ["file"])


def test_structured_content_reaches_the_model_once():
    same = to_result({"content": [{"type": "text", "text": "5"}], "structuredContent": {"result": 5}})
    assert same.text == "5"
    other = to_result({"content": [{"type": "text", "text": "done"}],
                       "structuredContent": {"n": 2}})
    assert other.text == 'done\n[structured content] {"n": 2}'
    assert [i["text"] for i in other.content] == ["done"]  # the editor shows the blocks
    alone = to_result({"content": [], "structuredContent": {"n": 2}})
    assert alone.text == '{"n": 2}'


def _get(port, target):
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", target)
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


def test_the_loopback_listener_checks_state_waits_bounded_and_closes():
    import gevent
    import pytest

    from term2acp.mcp.signin import Listener, SignInTimedOut

    listener = Listener()
    assert listener.redirect_uri == f"http://127.0.0.1:{listener.port}/callback"
    codes = []
    waiting = gevent.spawn(listener.wait, "the-state", 10, lambda code: codes.append(code) or "ok")
    assert _get(listener.port, "/favicon.ico")[0] == 404
    assert _get(listener.port, "/callback?code=c1&state=forged")[0] == 400  # and it waits on
    assert _get(listener.port, "/callback?code=c2&state=the-state") == (200, _page("ok"))
    waiting.get(timeout=5)
    listener.close()
    assert codes == ["c2"]
    with pytest.raises(OSError):  # closed after
        _get(listener.port, "/callback?code=c3&state=the-state")

    late = Listener()
    try:
        with pytest.raises(SignInTimedOut):
            late.wait("s", 0.2, lambda code: "never")
    finally:
        late.close()


def _page(words):
    return f"<!doctype html><meta charset=utf-8><title>term2acp</title><p>{words}</p>"
