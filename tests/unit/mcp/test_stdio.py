"""The client against our MCP server over stdio: handshake, paginated tools/list, calls,
isError, list_changed, garbage, crashes, env, cwd, cleanup. The handshake, call and
list_changed tests run the official-SDK server (``official=True``); the rest the fake."""

import json
import logging
import os
import sys
import time

import gevent
import pytest

from term2acp.mcp import rpc
from term2acp.mcp.client import DEAD, FAILED, READY
from term2acp.tools.base import ToolError
from tests.support.mcp_servers import LogWaiter, alive, stdio_entry, wait_gone
from tests.support.clock import within


def ready_hub(make_hub, *entries, **options):
    hub = make_hub(*entries, **options)
    assert hub.wait_ready(30)
    return hub


def test_handshake_lists_every_page_of_tools(make_hub):
    hub = ready_hub(make_hub, stdio_entry(official=True))
    client = hub.clients[0]
    assert client.state == READY
    assert client.server_info["name"] == "term2-test-server"
    names = [t["name"] for t in client.tools]
    assert len(names) == 16  # four pages of four
    assert {"echo", "add", "filler_4"} <= set(names)
    assert "mcp__test__echo" in hub.tools()


def test_call_text_structured_and_image_results(make_hub):
    tools = ready_hub(make_hub, stdio_entry(official=True)).tools()
    assert tools["mcp__test__echo"].run({"text": "hi"}, None).text == "echo: hi"
    added = tools["mcp__test__add"].run({"a": 2, "b": 40}, None)
    assert (added.text, added.is_error, added.raw_output) == ("42", False, {"result": 42})
    picture = tools["mcp__test__picture"].run({}, None)
    assert picture.text == "a pixel\n[image image/png, 70 bytes]"
    assert [item["type"] for item in picture.content] == ["text", "text"]


def test_is_error_result_is_a_failed_call_with_the_servers_message(make_hub):
    tools = ready_hub(make_hub, stdio_entry()).tools()
    result = tools["mcp__test__fail"].run({"message": "disk on fire"}, None)
    assert result.is_error and "disk on fire" in result.text


def test_list_changed_refreshes_before_the_next_look(make_hub):
    hub = ready_hub(make_hub, stdio_entry(official=True))
    assert "mcp__test__extra" not in hub.tools()
    assert hub.tools()["mcp__test__grow"].run({}, None).text == "grown"
    assert hub.changed.wait(10)  # the notification may trail the answer on the same pipe
    tools = hub.tools()
    assert tools["mcp__test__extra"].run({}, None).text == "extra here"
    assert tools["mcp__test__echo"] is hub.tools()["mcp__test__echo"]  # names and tools stable


def test_garbage_lines_are_skipped_and_the_call_still_answers(make_hub, caplog):
    caplog.set_level(logging.WARNING, "term2acp.mcp")
    hub = ready_hub(make_hub, stdio_entry())
    assert hub.tools()["mcp__test__garbage"].run({}, None).text == "garbage sent"
    assert hub.tools()["mcp__test__echo"].run({"text": "after"}, None).text == "echo: after"
    assert "not JSON" in caplog.text
    assert hub.clients[0].alive and hub.notices() == []


def test_crash_mid_call_fails_the_call_with_the_servers_last_words(make_hub):
    hub = ready_hub(make_hub, stdio_entry(), stdio_entry("other"))
    tools = hub.tools()
    with pytest.raises(ToolError) as info:
        tools["mcp__test__crash"].run({}, None)
    assert "exited with status 3" in str(info.value) and "boom: crashing on purpose" in str(info.value)
    with pytest.raises(ToolError, match="not available: the server exited"):
        tools["mcp__test__echo"].run({"text": "x"}, None)
    notices = hub.notices()
    assert len(notices) == 1 and "'test' stopped" in notices[0]
    assert hub.notices() == []  # once
    assert hub.clients[0].state == DEAD
    assert tools["mcp__other__echo"].run({"text": "still"}, None).text == "echo: still"


def test_a_command_that_does_not_exist_fails_alone(make_hub, tmp_path):
    missing = {"name": "ghost", "command": str(tmp_path / "no-such-server"), "args": [], "env": []}
    bare = {"name": "bare", "command": "no-such-mcp-server-xyz", "args": [], "env": []}
    hub = ready_hub(make_hub, missing, bare, stdio_entry())
    assert [c.state for c in hub.clients] == [FAILED, FAILED, READY]
    notices = hub.notices()
    assert len(notices) == 2
    assert "'ghost' could not be started" in notices[0] and "No such file" in notices[0]
    assert "not found on PATH: no-such-mcp-server-xyz" in notices[1]
    assert all(name.startswith("mcp__test__") for name in hub.tools())


def test_a_bare_command_is_resolved_on_path(make_hub):
    entry = stdio_entry()
    entry["command"] = os.path.basename(sys.executable)
    entry["env"] = [{"name": "PATH", "value": os.path.dirname(sys.executable)}]
    hub = ready_hub(make_hub, entry)
    assert hub.clients[0].state == READY


def test_env_is_exactly_the_given_one_plus_path_and_home(make_hub, root, monkeypatch):
    monkeypatch.setenv("T2_NOT_FOR_SERVERS", "leak")
    hub = ready_hub(make_hub, stdio_entry(env={"API_TOKEN": "s3cret"}))
    tools = hub.tools()
    probe = tools["mcp__test__env_probe"]
    assert probe.run({"name": "API_TOKEN"}, None).text == "s3cret"
    assert probe.run({"name": "T2_NOT_FOR_SERVERS"}, None).text == "<unset>"
    assert probe.run({"name": "HOME"}, None).text == os.environ["HOME"]
    where = json.loads(tools["mcp__test__where"].run({}, None).text)
    assert where["cwd"] == root
    assert where["pgid"] == where["pid"] == hub.clients[0].transport.pid  # its own group


def test_stderr_goes_to_the_log_and_secrets_nowhere(make_hub, caplog, capfd):
    caplog.set_level(logging.DEBUG, "term2acp.mcp")
    hub = ready_hub(make_hub, stdio_entry(env={"API_TOKEN": "s3cret-value"}))
    with LogWaiter("term2acp.mcp", "Tool 'fail' failed") as waiter:
        # The server echoes the message on its stderr: a secret in it is masked in our log.
        hub.tools()["mcp__test__fail"].run({"message": "to stderr s3cret-value"}, None)
        assert waiter.seen.wait(10)  # stderr is read concurrently with stdout
    out, _err = capfd.readouterr()
    assert "to stderr" not in out  # never our stdout
    assert "mcp test stderr: Tool 'fail' failed: 'Error executing tool fail: to stderr " \
           "<redacted>'" in caplog.text
    assert "s3cret-value" not in caplog.text and "s3cret-value" not in repr(hub.clients[0].config)
    assert hub.describe() == [{"name": "test", "transport": "stdio", "command": sys.executable}]


def test_close_leaves_no_process_not_even_grandchildren(make_hub):
    hub = ready_hub(make_hub, stdio_entry(), stdio_entry("second"))
    grandchild = int(hub.tools()["mcp__test__spawn_child"].run({}, None).text)
    pids = [c.transport.pid for c in hub.clients]
    assert all(alive(pid) for pid in pids + [grandchild])
    started = time.monotonic()
    hub.close()
    assert time.monotonic() - started < within(5)
    assert not any(alive(pid) for pid in pids)
    assert wait_gone(grandchild, 5)  # the group was killed; its new parent reaps the orphan
    assert hub.tools() == {}


def test_a_timed_out_call_is_cancelled_and_the_server_keeps_serving(make_hub):
    hub = ready_hub(make_hub, stdio_entry(), call_timeout=0.5)
    tools = hub.tools()
    started = time.monotonic()
    with pytest.raises(ToolError, match="did not answer within 0.5 s, so the call was cancelled"):
        tools["mcp__test__slow"].run({"seconds": 30}, None)
    assert time.monotonic() - started < within(3)
    assert tools["mcp__test__echo"].run({"text": "alive"}, None).text == "echo: alive"


def test_a_killed_call_sends_cancelled(make_hub, monkeypatch):
    hub = ready_hub(make_hub, stdio_entry())
    transport = hub.clients[0].transport
    sent = []
    original = transport.send
    monkeypatch.setattr(transport, "send", lambda m: (sent.append(m), original(m))[1])
    call = gevent.spawn(hub.tools()["mcp__test__slow"].run, {"seconds": 30}, None)
    with gevent.Timeout(10):
        while not sent:  # the call greenlet has not run yet: let it send its request
            gevent.sleep(0)
    call.kill(gevent.GreenletExit, block=True, timeout=5)
    assert call.dead
    cancel = sent[-1]
    assert cancel["method"] == "notifications/cancelled"
    assert cancel["params"]["requestId"] == sent[0]["id"]
    assert hub.tools()["mcp__test__echo"].run({"text": "next"}, None).text == "echo: next"


def test_connection_refuses_requests_after_loss():
    class Nowhere:
        def send(self, message):
            raise AssertionError("nothing may be sent")

    connection = rpc.Connection(Nowhere(), "x")
    connection.lost("went away")
    with pytest.raises(rpc.ServerGone, match="went away"):
        connection.request("tools/list")
