"""What an adversarial review of MCP broke (issue 23): secrets with stray line breaks, server
names that collide, titles that push the server's name away, endpoints on another origin."""

import json

import pytest

from term2acp.mcp.adapter import grant_key
from term2acp.mcp.config import from_acp, masked_servers, parse_servers
from term2acp.mcp.http import origin
from term2acp.tools.base import ToolError
from tests.support.mcp_servers import stdio_entry
from tests.unit.mcp.test_approval import DONE, Gate, call, run_turn, tool_results


def http_entry(headers=(), url="http://127.0.0.1:9/mcp", name="web"):
    return {"type": "http", "name": name, "url": url,
            "headers": [{"name": k, "value": v} for k, v in headers]}


def test_a_header_token_pasted_with_its_newline_is_stripped():
    (config,) = parse_servers([http_entry([("Authorization", " Bearer tok-123\r\n")])])
    assert config.headers == {"Authorization": "Bearer tok-123"}
    # what the server echoes is masked whole, so no half of the value survives
    assert config.redact("got Bearer tok-123 twice: tok-123") == "got <redacted> twice: tok-123"
    (stdio,) = parse_servers([{"name": "s", "command": "/bin/s",
                               "env": [{"name": "TOKEN", "value": "line1\nline2\n"}]}])
    assert stdio.env == {"TOKEN": "line1\nline2"}  # inner line feeds (PEM keys) are kept


@pytest.mark.parametrize("entry, message", [
    (http_entry([("Authorization", "Bearer tok\r\nX-Evil: 1")]),
     "mcpServers[0] ('web'): the value of header Authorization contains a line break"),
    (http_entry([("X-Key", "a\x00b-secret")]), "the value of header X-Key contains"),
    (http_entry([("Bad Name", "secret-v")]), "header name 'Bad Name' is not a valid HTTP header name"),
    (http_entry([("Content-Length", "0")]), "header Content-Length is set by the agent"),
    ({"name": "s", "command": "/bin/s", "env": [{"name": "T", "value": "x\x00secret-v"}]},
     "the value of environment variable T contains NUL"),
    ({"name": "s", "command": "/bin/s", "env": [{"name": "T", "value": "x\rsecret-v"}]},
     "the value of environment variable T contains"),
    ({"name": "s", "command": "/bin/s", "env": [{"name": "A=B", "value": "v"}]}, "contains '='"),
    (http_entry(url="http://127.0.0.1:99999/mcp"), "valid port"),
    (http_entry(url="http://127.0.0.1/m\ncp?token=secret-v"), "no spaces or control characters"),
])
def test_malformed_secrets_are_refused_naming_the_server_never_the_value(entry, message):
    with pytest.raises(ValueError) as info:
        parse_servers([entry])
    assert message in str(info.value)
    assert "secret-v" not in str(info.value) and "tok" not in str(info.value).replace("token", "")


def test_duplicate_server_names_are_refused():
    with pytest.raises(ValueError, match=r"mcpServers\[1\] \('x'\): the name is already used by "
                                         r"mcpServers\[0\]"):
        parse_servers([stdio_entry("x"), http_entry(name="x")])


def test_a_session_grant_does_not_cover_another_server_under_the_same_name(make_hub, root):
    """A resume that configures a different server under the old name asks again."""
    first = make_hub(stdio_entry("twin"))
    session, _, turn = run_turn(first, root, [call("1", "mcp__twin__echo", text="a"), DONE],
                                Gate("allow-tool-session"))
    assert turn.run("go") == "end_turn"
    other = stdio_entry("twin")
    other["args"] = other["args"] + ["another-build"]
    second = make_hub(other)
    gate = Gate("reject")
    _, _, turn = run_turn(second, root, [call("1", "mcp__twin__echo", text="b"), DONE], gate)
    turn.session.access = session.access  # the same session's grants
    assert turn.run("go") == "end_turn"
    assert len(gate.asked) == 1  # the grant was for the first server only
    assert grant_key(first.clients[0].config, "echo") != grant_key(second.clients[0].config, "echo")
    assert grant_key(first.clients[0].config, "echo") == grant_key(
        from_acp(stdio_entry("twin")), "echo")  # the same server again keeps its grant


def test_a_tools_own_title_is_bounded_and_cannot_push_the_server_name_away(make_hub, root):
    evil = {"name": "look", "title": "\u202eEvil\n" * 1000, "description": "d\x1b[2Jx\u202e",
            "inputSchema": {"type": "object"}}
    entry = stdio_entry("srv", env={"MCP_FAKE_TOOLS": json.dumps([evil])})
    hub = make_hub(entry)
    gate = Gate("allow-once")
    session, provider, turn = run_turn(hub, root, [call("1", "mcp__srv__look"), DONE], gate)
    assert turn.run("go") == "end_turn"
    (asked,) = gate.asked
    assert asked.title.startswith("Run look from the MCP server srv: Evil Evil")
    assert len(asked.title) <= 200 and asked.title.isprintable() and "\u202e" not in asked.title
    tool = hub.tools()["mcp__srv__look"]
    title = tool.title({})
    assert title.startswith("look (srv): Evil") and len(title) <= 200 and title.isprintable()
    assert tool.spec()["description"] == "d [2Jx \n(MCP server: srv)"
    assert tool_results(session)[0]["content"] == "raw look"


@pytest.mark.parametrize("a, b, same", [
    ("http://h/sse", "http://H:80/messages/", True),
    ("https://h/sse", "https://h:443/m", True),
    ("http://h/sse", "https://h/m", False),
    ("http://h:8000/sse", "http://h:8001/m", False),
    ("http://h/sse", "http://h.evil/m", False),
])
def test_origin_compares_scheme_host_and_port(a, b, same):
    assert (origin(a) == origin(b)) is same


def test_the_wire_log_text_masks_every_server_secret():
    message = {"jsonrpc": "2.0", "id": 3, "method": "session/new", "params": {
        "cwd": "/w", "mcpServers": [
            http_entry([("Authorization", "Bearer hdr-secret")],
                       url="http://u:pw-secret@127.0.0.1/mcp?key=q-secret"),
            {"name": "s", "command": "/bin/s", "args": ["-v"],
             "env": [{"name": "TOKEN", "value": "env-secret"}]}]}}
    text = masked_servers(message)
    assert "secret" not in text
    shown = json.loads(text)["params"]["mcpServers"]
    assert shown[1] == {"name": "s", "command": "/bin/s", "args": ["-v"],
                        "env": [{"name": "TOKEN", "value": "<redacted>"}]}
    assert shown[0]["url"].startswith("http://127.0.0.1/mcp")
    assert masked_servers({"jsonrpc": "2.0", "method": "session/cancel", "params": {}}) is None


# ------------------------------------------------------------------ bounded input
BIG = {"MCP_FAKE_MANY": "0"}  # adds the tool ``big``


@pytest.fixture
def small_bounds(monkeypatch):
    """1 MiB messages and 40 tools, so that a test need not send 16 MiB."""
    from term2acp.mcp import client, http, stdio

    monkeypatch.setattr(stdio, "MAX_LINE", 1 << 20)
    monkeypatch.setattr(http, "MAX_MESSAGE", 1 << 20)
    monkeypatch.setattr(client, "MAX_TOOLS", 40)


@pytest.mark.parametrize("transport", ["stdio", "http", "json", "sse"])
def test_a_message_over_the_bound_drops_that_server_and_the_others_serve(
        make_hub, small_bounds, transport):
    from tests.support.mcp_servers import HttpServer

    server = None
    if transport == "stdio":
        entry = stdio_entry("big", env=BIG)
    else:
        env = dict(BIG, MCP_FAKE_JSON="1") if transport == "json" else BIG
        server = HttpServer("sse" if transport == "sse" else "http", env=env)
        entry = server.entry("big")
    try:
        hub = make_hub(entry, stdio_entry("other"))
        assert hub.wait_ready(30)
        tools = hub.tools()
        assert tools["mcp__big__big"].run({"size": 1000}, None).text == "x" * 1000
        with pytest.raises(ToolError) as info:
            tools["mcp__big__big"].run({"size": 2 << 20}, None)
        assert "larger than 1 MiB, the limit; it was disconnected" in str(info.value)
        assert not hub.clients[0].alive
        (notice,) = hub.notices()
        assert "'big' stopped" in notice and "larger than 1 MiB" in notice
        assert tools["mcp__other__echo"].run({"text": "still"}, None).text == "echo: still"
        if transport == "stdio":
            from tests.support.mcp_servers import wait_gone

            assert wait_gone(hub.clients[0].transport.pid, 5)  # not left running
    finally:
        if server is not None:
            server.stop()


def test_a_tool_list_over_the_bound_fails_that_server_alone(make_hub, small_bounds):
    many = stdio_entry("many", env={"MCP_FAKE_MANY": "30", "MCP_FAKE_PAGE": "7"})  # 47 tools
    hub = make_hub(many, stdio_entry("other"))
    assert hub.wait_ready(30)
    (notice,) = hub.notices()
    assert "'many' could not be started: the server lists more than 40 tools" in notice
    assert {n.split("__")[1] for n in hub.tools()} == {"other"}


def test_a_tool_list_over_the_byte_bound_fails_that_server(make_hub, monkeypatch):
    from term2acp.mcp import client

    monkeypatch.setattr(client, "MAX_TOOL_BYTES", 4000)  # the fake's 16 tools take ~4.7 kB
    hub = make_hub(stdio_entry())
    assert hub.wait_ready(30)
    (notice,) = hub.notices()
    assert "MiB of tool definitions" in notice or "tool definitions" in notice


def test_deeply_nested_messages_are_dropped_not_raised(make_hub):
    from term2acp.mcp.rpc import Connection

    connection = Connection(None, "deep")
    nested = []
    for _ in range(5000):
        nested = [nested]
    connection.receive([nested])  # a batch inside a batch: ignored, no RecursionError


# ------------------------------------------------------------------ what a request offers
def test_choose_puts_enabled_tools_first_then_takes_servers_in_turn():
    from term2acp.mcp.offer import choose

    groups = [["a1", "a2", "a3", "a4"], ["b1"], ["c1", "c2"]]
    assert choose(groups, [], 5) == ["a1", "b1", "c1", "a2", "c2"]
    assert choose(groups, ["a4", "zz", "c2"], 3) == ["c2", "a4", "a1"]  # most recent first
    assert choose(groups, [], 0) == []


def test_a_request_offers_at_most_the_limit_and_the_model_can_enable_a_left_out_tool(make_hub, root):
    hub = make_hub(stdio_entry("big", env={"MCP_FAKE_MANY": "300"}), stdio_entry("other"))
    assert hub.wait_ready(30)
    builtin = {f"builtin_{i}": object() for i in range(20)}
    merged = hub.merged(builtin, limit=128)
    assert len(merged) == 128 and list(merged)[:20] == list(builtin)
    names = list(merged)
    assert "mcp_tools" in names and "mcp__other__echo" in names and "mcp__big__echo" in names
    assert "mcp__big__many_299" not in names
    offer = merged.offer()
    assert len(offer.left_out) == 318 + 16 - 107
    assert "227 MCP tools are not offered to the model (big: 91 of 318, other: 16 of 16 offered)" \
           in offer.notice()
    finder = merged["mcp_tools"]
    assert "227 MCP server tools are not offered" in finder.spec()["description"]
    found = finder.run(finder.load({"query": "Many tool 299"}), None).text
    assert found.startswith("1 matching MCP tools") and "mcp__big__many_299: Many tool 299." in found
    done = finder.run(finder.load({"enable": ["mcp__big__many_299", "mcp__nope__x"]}), None).text
    assert "Enabled (offered from your next step on): mcp__big__many_299." in done
    assert "No such MCP tool: mcp__nope__x." in done
    names = list(merged)
    assert len(names) == 128 and "mcp__big__many_299" in names  # the very next look
    # a tool left out can still be called by its name (its first call asks, as any)
    assert merged["mcp__big__many_1"].run({}, None).text == "many 1"


def test_the_users_choice_per_server_limits_what_is_offered_and_callable(make_hub):
    hub = make_hub(stdio_entry("other"), stdio_entry("all"))
    assert hub.wait_ready(30)
    merged = hub.merged({}, {"other": ["echo", "fill*_1"]})
    assert [n for n in merged if n.startswith("mcp__other__")] == [
        "mcp__other__echo", "mcp__other__filler_1"]
    assert len([n for n in merged if n.startswith("mcp__all__")]) == 16
    assert "mcp_tools" not in merged and merged.offer().notice() is None
    with pytest.raises(KeyError):
        merged["mcp__other__add"]  # left out by the user: not callable either


def test_the_config_file_takes_a_tool_choice_per_server_and_refuses_a_bad_one():
    from marshmallow import ValidationError

    from term2acp import config

    loaded = config.SCHEMA.load({"mcp": {"max_tools": 64, "tools": {"github": ["get_*"]}}})
    assert loaded["mcp"] == {"max_tools": 64, "tools": {"github": ["get_*"]}}
    with pytest.raises(ValidationError, match="must be a table of lists of tool names"):
        config.SCHEMA.load({"mcp": {"tools": {"github": "get_*"}}})


def test_a_servers_error_reaches_nobody_with_a_secret_or_a_control_character(make_hub):
    hub = make_hub(stdio_entry(env={"MCP_FAKE_MANY": "0", "TOKEN": "tok-secret-77"}))
    assert hub.wait_ready(30)
    with pytest.raises(ToolError) as info:
        hub.tools()["mcp__test__env_error"].run({"name": "TOKEN"}, None)
    assert str(info.value) == "The MCP server test refused the call: bad credentials <redacted> [31m red"


def test_plain_bounds_a_servers_words_and_drops_controls():
    from term2acp.mcp.rpc import plain

    assert plain("a\x1b[2J\u202eb\tc\nd") == "a [2J b\tc\nd"
    assert len(plain("x" * 5000)) == 2000


def test_a_session_id_that_is_not_visible_ascii_fails_the_server(make_hub):
    from tests.support.mcp_servers import HttpServer

    server = HttpServer("http", env={"MCP_FAKE_SESSION_ID": "two words"})
    try:
        hub = make_hub(server.entry())
        assert hub.wait_ready(30)
        (notice,) = hub.notices()
        assert "the server's Mcp-Session-Id is not visible ASCII" in notice
    finally:
        server.stop()
