"""The network on request, through the launcher on v1 and v2, with a model server of the
test's own (tests/support/fake_llm.py) making the calls and an HTTP server of the test's
own on 127.0.0.1 as the network: no network without asking, four options, reject runs
nothing, allow once reaches the server, a prefix grant covers the next matching command
but not another, ask mode asks despite the grant, read-only refuses."""

import json
import os
import shutil

import pytest
from gevent.pywsgi import WSGIServer

from tests.support import fake_llm as f

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None and not os.environ.get("CI"),
                                reason="bubblewrap is not installed")


class Site:
    """An HTTP server on 127.0.0.1 that records the paths it served."""

    def __init__(self):
        self.paths = []
        self.server = WSGIServer(("127.0.0.1", 0), self.app, log=None, error_log=None)
        self.server.start()
        self.port = self.server.server_port

    def app(self, environ, start_response):
        self.paths.append(environ["PATH_INFO"])
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [f"served {environ['PATH_INFO']}\n".encode()]

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture
def site():
    s = Site()
    yield s
    s.server.stop()


@pytest.fixture
def model():
    srv = f.FakeLLMServer()
    srv.start()
    yield srv
    srv.stop()


class Session:
    """One agent session where each prompt is one shell call, then "ok"."""

    def __init__(self, acp_agent, workspace, model, protocol):
        self.model, self.protocol, self.calls = model, protocol, 0
        self.agent = acp_agent(args=["--provider", "openai", "--model", "gpt-4.1-mini"],
                               env={"OPENAI_BASE_URL": model.openai_url,
                                    "OPENAI_API_KEY": "x"}, protocol=protocol)
        result = self.agent.request("session/new", {"cwd": workspace, "mcpServers": []})
        self.sid = result["result"]["sessionId"]

    def run(self, command, answer=None, **arguments):
        """Run one shell call; ``answer`` picks an option id from the offered ones (None:
        the test expects no question). Returns (questions' option ids, final update)."""
        self.calls += 1
        args = json.dumps(dict(command=command, **arguments))
        self.model.enqueue(
            f.openai_sse(f.oa_tool(0, f"call_{self.calls}", "shell", args),
                         f.oa_finish("tool_calls")),
            f.openai_sse(f.oa_text("ok"), f.oa_finish("stop")))
        asked = []

        def on_request(message):
            if message["method"] != "session/request_permission":
                return None
            options = [o["optionId"] for o in message["params"]["options"]]
            asked.append(options)
            choice = answer(options) if callable(answer) else answer
            return {"outcome": {"outcome": "selected", "optionId": choice}}
        _, updates, _ = self.agent.prompt(self.sid, "go", timeout=60, on_request=on_request)
        final = [u for u in updates if u["sessionUpdate"] in ("tool_call", "tool_call_update")
                 and u.get("status") in ("completed", "failed")][-1]
        return asked, final

    def mode(self, mode):
        response = self.agent.request("session/set_config_option",
                                      {"sessionId": self.sid, "configId": "mode",
                                       "value": mode})
        assert "result" in response, response


def curl(site, path):
    return f"curl -s -S -m 5 {site.url(path)}"


THREE = ["allow-once", "allow-network-session", "reject"]


@pytest.mark.parametrize("protocol", [1, 2])
def test_network_on_request(acp_agent, acp_workspace, model, site, protocol):
    s = Session(acp_agent, acp_workspace, model, protocol)
    # without network: nobody asked, the command has no network
    asked, final = s.run(curl(site, "/none"))
    assert asked == [] and final["status"] == "failed" and site.paths == []
    asked, final = s.run("curl -s -S -m 5 http://pypi.org/simple/")  # no DNS either
    assert asked == [] and final["status"] == "failed"
    told = [m for m in model.wait_requests(4)[-1].json["messages"] if m["role"] == "tool"]
    assert "run it again with network: true" in told[-1]["content"]  # the model learns how
    # network: three options, no prefix grant; reject runs nothing
    asked, final = s.run(curl(site, "/rejected"), "reject", network=True)
    assert asked == [THREE] and final["status"] == "failed" and site.paths == []
    # allow once reaches the server, and grants nothing
    asked, final = s.run(curl(site, "/once"), "allow-once", network=True)
    assert asked == [THREE] and final["status"] == "completed" and site.paths == ["/once"]
    asked, final = s.run(curl(site, "/again"), "reject", network=True)
    assert asked == [THREE] and site.paths == ["/once"]
    # the session grant: every later command, chained or not, unasked
    asked, final = s.run(curl(site, "/session"), "allow-network-session", network=True)
    assert asked == [THREE] and site.paths[-1] == "/session"
    asked, final = s.run(f"echo; {curl(site, '/granted')}", network=True)
    assert asked == [] and final["status"] == "completed" and site.paths[-1] == "/granted"
    # ask mode asks despite the grant
    s.mode("ask")
    asked, _ = s.run(curl(site, "/ask"), "reject", network=True)
    assert asked == [THREE] and site.paths[-1] == "/granted"
    # read-only refuses without asking
    s.mode("read-only")
    asked, final = s.run(curl(site, "/read-only"), "allow-once", network=True)
    assert asked == [] and final["status"] == "failed" and site.paths[-1] == "/granted"
    assert s.agent.close() == 0


def test_ask_mode_offers_the_command_prefix_grant(acp_agent, acp_workspace, model):
    s = Session(acp_agent, acp_workspace, model, 2)
    s.mode("ask")
    asked, final = s.run("echo one > one.txt", "allow-command-prefix-session")
    assert asked == [["allow-once", "allow-command-prefix-session", "reject"]]
    assert final["status"] == "completed"
    asked, final = s.run("echo one > two.txt")  # "echo one": no question
    assert asked == [] and os.path.exists(os.path.join(acp_workspace, "two.txt"))
    asked, _ = s.run("echo two > three.txt", "reject")
    assert len(asked) == 1 and not os.path.exists(os.path.join(acp_workspace, "three.txt"))
    assert s.agent.close() == 0


@pytest.mark.parametrize("protocol", [1, 2])
def test_no_grant_opens_the_network_to_commands_by_their_first_words(acp_agent, acp_workspace,
                                                                      model, site, protocol):
    """A network grant for commands that start with ``git clone`` let ``git clone
    --upload-pack='<any command>'`` (and ``git clone x#; curl``) reach any host: no such
    choice is offered any more, and a client answering with its old id is refused."""
    s = Session(acp_agent, acp_workspace, model, protocol)
    asked, final = s.run(f"git clone {site.url('/repo')} r", "allow-network-prefix-session",
                         network=True)
    assert asked == [THREE] and final["status"] == "failed"  # an unknown choice: denied
    assert site.paths == []
    upload = f"--upload-pack='{curl(site, '/upload-pack')}; false'"
    for line in (f"git clone {upload} {site.url('/repo')} r2",
                 f"git clone x#; {curl(site, '/semicolon')}",
                 f"git clone y# || {curl(site, '/or')}"):
        asked, final = s.run(line, "reject", network=True)
        assert asked == [THREE] and final["status"] == "failed", line
    assert site.paths == []
    assert s.agent.close() == 0


@pytest.mark.parametrize("protocol", [1, 2])
def test_a_hash_inside_a_word_does_not_end_the_ask_mode_grant(acp_agent, acp_workspace,
                                                              model, protocol):
    """The same in ask mode: after "allow commands that start with `git status`", a line
    that chains a command behind ``status#`` asks."""
    s = Session(acp_agent, acp_workspace, model, protocol)
    s.mode("ask")
    asked, _ = s.run("git status", "allow-command-prefix-session")
    assert asked == [["allow-once", "allow-command-prefix-session", "reject"]]
    asked, _ = s.run("git status#; touch pwned", "reject")
    assert asked == [["allow-once", "reject"]]
    assert not os.path.exists(os.path.join(acp_workspace, "pwned"))
    asked, _ = s.run("git status")  # the grant itself still holds
    assert asked == []
    assert s.agent.close() == 0
