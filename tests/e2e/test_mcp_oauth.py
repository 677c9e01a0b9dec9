"""Signing in to a remote MCP server, through the real agent: a loopback OAuth
authorization server and a streamable HTTP MCP server that needs its bearer tokens
(tests/support/mcp_oauth_fake.py). The test follows the authorization URL as a browser
would (the fake signs in at once and redirects to the agent's loopback listener)."""

import json
import os
import re
import stat
import subprocess
import sys
import urllib.request

import gevent
import pytest

from tests.e2e.test_mcp import agent_text, call, final, history, mcp_agent, selected, text_of  # noqa: F401
from term2acp.testing.harness import V2_INITIALIZE
from tests.support.mcp_servers import ROOT, START_TIMEOUT, stdio_entry

FAKE = os.path.join(ROOT, "tests", "support", "mcp_oauth_fake.py")
URL = re.compile(r"open (http://127\.0\.0\.1:\d+/authorize\?\S+) in your browser")


class OAuthServer:
    def __init__(self, env=None):
        self.proc = subprocess.Popen([sys.executable, FAKE], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env={**os.environ, **(env or {})}, start_new_session=True)
        with gevent.Timeout(START_TIMEOUT):
            line = self.proc.stdout.readline().decode()
        assert line.startswith("PORT "), line
        self.origin = f"http://127.0.0.1:{int(line.split()[1])}"
        self.url = self.origin + "/mcp"

    def entry(self, name="remote"):
        return {"type": "http", "name": name, "url": self.url, "headers": []}

    def control(self, what):
        method = "GET" if what == "stats" else "POST"
        request = urllib.request.Request(f"{self.origin}/control/{what}", method=method,
                                         data=None if method == "GET" else b"")
        with browser().open(request, timeout=10) as response:
            return json.loads(response.read())

    def stop(self):
        self.proc.kill()
        self.proc.wait(10)
        self.proc.stdout.close()


def browser():
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


def follow(url):
    """Open the authorization URL as a browser would: the redirect lands on the agent."""
    with browser().open(url, timeout=20) as response:
        return response.status, response.read().decode()


def sign_in_url(updates):
    found = URL.search(agent_text(updates))
    assert found, agent_text(updates)
    return found.group(1)


@pytest.fixture
def oauth_server():
    servers = []

    def start(env=None):
        servers.append(OAuthServer(env))
        return servers[-1]
    yield start
    for server in servers:
        server.stop()


def token_files(home):
    folder = home / "mcp-auth"
    return folder, sorted(folder.iterdir()) if folder.exists() else []


def stored(home):
    return b"".join(p.read_bytes() for p in home.iterdir() if p.name.startswith("sessions.sqlite3"))


@pytest.mark.acp_process  # stderr and stdout of a process are searched for the token
@pytest.mark.parametrize("protocol", [2, 1])
def test_sign_in_refresh_reuse_revoke_and_login_again(mcp_agent, oauth_server, home, protocol):
    server = oauth_server()
    allow = lambda m: selected("allow-tool-session")  # noqa: E731
    turns = [[{"text": "hello"}],
             [call("mcp__remote__echo", text="signed")], [{"text": "one"}],
             [call("mcp__remote__echo", text="refreshed")], [{"text": "two"}]]
    agent, sid, _ = mcp_agent(turns, [server.entry()], protocol)
    _, updates, _ = agent.prompt(sid, "hi", timeout=60)
    url = sign_in_url(updates)
    assert "resource=" in url and "code_challenge_method=S256" in url
    status, page = follow(url)
    assert status == 200 and "Signed in to the MCP server remote" in page
    _, updates, _ = agent.prompt(sid, "echo", timeout=60, on_request=allow)
    assert text_of(final(updates)) == "echo: signed"
    stats = server.control("stats")
    assert (stats["registrations"], stats["authorizations"], stats["code_grants"]) == (1, 1, 1)
    assert stats["refused"] == []  # PKCE, state, resource and redirect were all as required

    folder, (token_file,) = token_files(home)
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    first = json.loads(token_file.read_text())["token"]

    server.control("expire")  # the server forgets the access token: a 401, one refresh
    _, updates, _ = agent.prompt(sid, "again", timeout=60, on_request=allow)
    assert text_of(final(updates)) == "echo: refreshed"
    assert server.control("stats")["refresh_grants"] == 1
    second = json.loads(token_file.read_text())["token"]
    assert second["access_token"] != first["access_token"]
    agent.close()
    for secret in (first["access_token"], first["refresh_token"], second["access_token"],
                   second["refresh_token"]):
        assert secret not in agent.stderr
        assert secret.encode() not in b"".join(agent.lines)
        assert secret.encode() not in stored(home)
    results = [m["content"] for m in history(home, sid) if m["role"] == "tool"]
    assert results == ["echo: signed", "echo: refreshed"]

    # A new agent process signs in with the stored token: no new sign-in.
    turns = [[call("mcp__remote__echo", text="reused")], [{"text": "three"}],
             [call("mcp__remote__echo", text="revoked")], [{"text": "four"}],
             [call("mcp__remote__echo", text="back")], [{"text": "five"}]]
    agent, sid, _ = mcp_agent(turns, [server.entry()], protocol)
    _, updates, _ = agent.prompt(sid, "echo", timeout=60, on_request=allow)
    assert text_of(final(updates)) == "echo: reused" and "sign in" not in agent_text(updates)
    assert server.control("stats")["registrations"] == 1

    server.control("revoke")  # the access and the refresh token are refused
    _, updates, _ = agent.prompt(sid, "echo", timeout=60, on_request=allow)
    failed = final(updates)
    assert failed["status"] == "failed" and "/mcp-login remote" in text_of(failed)

    _, updates, _ = agent.prompt(sid, "/mcp-login remote", timeout=60)
    status, page = follow(sign_in_url(updates))
    assert status == 200 and "Signed in" in page
    _, updates, _ = agent.prompt(sid, "echo", timeout=60, on_request=allow)
    assert text_of(final(updates)) == "echo: back"
    assert server.control("stats")["registrations"] == 2

    _, updates, _ = agent.prompt(sid, "/mcp-logout remote", timeout=60)
    assert "token file is deleted" in agent_text(updates)
    assert token_files(home)[1] == []
    agent.close()
    said = history(home, sid)  # sign-in is the user's business: the model never sees it
    assert "authorize?" not in json.dumps(said)
    assert not any(str(m["content"]).startswith("/mcp-") for m in said if m["role"] == "user")


def test_a_token_about_to_expire_is_refreshed_before_the_call(mcp_agent, oauth_server):
    server = oauth_server({"MCP_OAUTH_EXPIRES_IN": "30"})  # inside the refresh margin
    turns = [[{"text": "hello"}], [call("mcp__remote__echo", text="early")], [{"text": "ok"}]]
    agent, sid, _ = mcp_agent(turns, [server.entry()])
    _, updates, _ = agent.prompt(sid, "hi", timeout=60)
    follow(sign_in_url(updates))
    refused = server.control("stats")["unauthorized"]
    _, updates, _ = agent.prompt(sid, "echo", timeout=60,
                                 on_request=lambda m: selected("allow-once"))
    assert text_of(final(updates)) == "echo: early"
    stats = server.control("stats")
    assert stats["refresh_grants"] >= 1 and stats["unauthorized"] == refused  # never a 401
    agent.close()


def test_a_client_with_url_elicitation_is_shown_the_sign_in_page(acp_agent, oauth_server, home,
                                                                  workspace):
    server = oauth_server()
    turns = [[call("mcp__test__echo", text="meanwhile")], [{"text": "hello"}],
             [call("mcp__remote__echo", text="via editor")], [{"text": "ok"}]]
    agent = acp_agent(turns=turns, env={"TERM2ACP_HOME": str(home)}, initialize=False)
    agent.initialize_params = dict(V2_INITIALIZE, capabilities={"elicitation": {"url": {}}})
    agent.initialize()
    sid = agent.new_session(workspace, mcp_servers=[server.entry(), stdio_entry()])
    shown = []

    def editor(message):
        if message["method"] == "elicitation/create":
            shown.append(message["params"])
            return {"action": "accept"}
        return selected("allow-once")
    _, updates, _ = agent.prompt(sid, "hi", timeout=60, on_request=editor)
    assert text_of(final(updates)) == "echo: meanwhile"  # the other server works meanwhile
    if not shown:  # the question is not waited for: it may come after the turn's end
        late = agent.wait_for(lambda m: m.get("method") == "elicitation/create", 20)
        agent.send({"jsonrpc": "2.0", "id": late["id"], "result": editor(late)})
    (question,) = shown
    assert question["mode"] == "url" and question["sessionId"] == sid
    assert URL.search(f"open {question['url']} in your browser")
    assert question["url"] not in agent_text(updates)  # not also an agent message
    assert "the editor shows its sign-in page" in agent_text(updates)
    status, _ = follow(question["url"])
    assert status == 200
    _, updates, _ = agent.prompt(sid, "echo", timeout=60, on_request=editor)
    assert text_of(final(updates)) == "echo: via editor"
    agent.close()


@pytest.mark.parametrize("knob, why", [
    ("MCP_OAUTH_NO_PKCE", "does not offer PKCE with S256"),
    ("MCP_OAUTH_OTHER_RESOURCE", "metadata names another resource")])
def test_a_server_without_pkce_or_for_another_resource_is_refused(mcp_agent, oauth_server,
                                                                  knob, why):
    server = oauth_server({knob: "1"})
    agent, sid, _ = mcp_agent([[{"text": "hello"}]], [server.entry()])
    _, updates, _ = agent.prompt(sid, "hi", timeout=60)
    told = agent_text(updates)
    assert told.count(why) == 1 and "'remote' could not be started: signing in failed" in told
    assert "/mcp-login remote tries again" in told
    assert "authorize?" not in told and server.control("stats")["registrations"] == 0
    agent.close()


def test_a_new_login_replaces_the_waiting_one(mcp_agent, oauth_server):
    server = oauth_server()
    turns = [[{"text": "hello"}], [call("mcp__remote__echo", text="second")], [{"text": "ok"}]]
    agent, sid, _ = mcp_agent(turns, [server.entry()])
    _, updates, _ = agent.prompt(sid, "hi", timeout=60)
    first = sign_in_url(updates)
    _, updates, _ = agent.prompt(sid, "/mcp-login remote", timeout=60)
    second = sign_in_url(updates)
    assert second != first
    with pytest.raises(OSError):  # the first sign-in's listener is closed
        follow(first)
    assert follow(second)[0] == 200
    _, updates, _ = agent.prompt(sid, "echo", timeout=60,
                                 on_request=lambda m: selected("allow-once"))
    assert text_of(final(updates)) == "echo: second" and "failed" not in agent_text(updates)
    agent.close()
