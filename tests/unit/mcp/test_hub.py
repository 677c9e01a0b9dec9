"""The hub's life: start at once, wait bounded, notices once, close even while starting;
result mapping."""

import time

from term2acp.mcp.adapter import DISPLAY_CAP, to_result
from tests.support.mcp_servers import alive, stdio_entry


def test_start_returns_at_once_and_close_during_start_leaves_no_process(make_hub):
    hub = make_hub(stdio_entry(), stdio_entry("two"))
    assert hub.pending == ["test", "two"] and hub.tools() == {}
    hub.close()
    pids = [c.transport.pid for c in hub.clients if c.transport.pid]
    assert not any(alive(pid) for pid in pids)
    assert hub.tools() == {} and hub.notices() == []


def test_wait_ready_is_bounded_and_a_slow_server_is_announced(make_hub):
    hub = make_hub(stdio_entry())
    started = time.perf_counter()
    ready = hub.wait_ready(0.01)
    assert time.perf_counter() - started < 1
    if not ready:  # the server is still importing: the user hears it once
        assert hub.notices() == ["The MCP server 'test' is still starting; its tools become "
                                 "available once it is ready."]
        assert hub.notices() == []
    assert hub.wait_ready(30) and "mcp__test__echo" in hub.tools()


class FakeTool:
    def __init__(self, name, server="a", client=None):
        self.name, self.server, self.tool, self.client = name, server, name.split("__")[-1], client
        self.description = f"tool {name}"


def test_merged_mapping_sees_builtins_first_and_new_mcp_tools():
    from term2acp.mcp.hub import _Merged

    class FakeHub:
        extra = {}
        enabled = []

        def tools(self):
            return self.extra

        def relist(self, name):
            return False  # nothing more to list

    hub = FakeHub()
    merged = _Merged({"read_file": "builtin"}, hub)
    assert dict(merged) == {"read_file": "builtin"} and merged.get("mcp__a__b") is None
    tool = FakeTool("mcp__a__b")
    hub.extra = {"mcp__a__b": tool, "read_file": FakeTool("read_file")}
    assert dict(merged) == {"read_file": "builtin", "mcp__a__b": tool}
    assert merged["mcp__a__b"] is tool and len(merged) == 2


def test_results_map_every_content_kind():
    result = to_result({"content": [
        {"type": "text", "text": "hello"},
        {"type": "image", "mimeType": "image/png", "data": "aGVsbG8="},
        {"type": "audio", "mimeType": "audio/wav", "data": "!!"},
        {"type": "resource_link", "uri": "file:///a.txt", "name": "a.txt"},
        {"type": "resource", "resource": {"uri": "file:///b.txt", "text": "bee"}},
        {"type": "resource", "resource": {"uri": "file:///c.bin", "mimeType": "application/x", "blob": "AAAA"}},
        {"type": "future"}, "junk"]})
    assert result.text.split("\n") == [
        "hello", "[image image/png, 5 bytes]", "[audio audio/wav, 0 bytes]",
        "[resource link] a.txt file:///a.txt", "[resource file:///b.txt]", "bee",
        "[resource file:///c.bin application/x, 3 bytes]", "[future content]"]
    assert not result.is_error and len(result.content) == 7


def test_results_structured_errors_and_caps():
    assert to_result({"content": [], "structuredContent": {"n": 1}}).text == '{"n": 1}'
    failed = to_result({"content": [], "isError": True})
    assert failed.is_error and failed.text == "The tool failed without a message."
    assert to_result({}).text == "(no output)"
    big = to_result({"content": [{"type": "text", "text": "x" * 50_000}] * 2})
    assert len(big.text) == 100_001  # the turn caps what the model sees
    assert sum(len(i["text"]) for i in big.content) == DISPLAY_CAP


def test_session_glue_connects_tells_once_and_closes(root, tmp_path):
    from term2acp.core import events as ev
    from term2acp.mcp import session as glue
    from term2acp.mcp.config import from_acp

    class Live:
        id, mcp, mcp_servers = "s1", None, ()

        def __init__(self):
            self.root, self.events = root, []

        def emit(self, event):
            self.events.append(event)

    live = Live()
    assert glue.turn_tools(live, {"read_file": 1}, lambda p: p) == {"read_file": 1}
    ghost = {"name": "ghost", "command": str(tmp_path / "missing"), "args": [], "env": []}
    glue.connect(live, [from_acp(ghost), from_acp(stdio_entry())])
    first = live.mcp
    tools = glue.turn_tools(live, {"read_file": 1}, lambda p: p)
    assert "read_file" in tools and "mcp__test__echo" in tools
    (notice,) = live.events
    assert isinstance(notice, ev.TextChunk) and "'ghost' could not be started" in notice.text
    glue.turn_tools(live, {}, lambda p: p)
    assert len(live.events) == 1  # told once
    pid = first.clients[1].transport.pid
    glue.close(live)  # idle close: the servers stop, the session remembers them
    assert live.mcp is None and first.closed and not alive(pid)
    assert "mcp__test__echo" in glue.turn_tools(live, {}, lambda p: p)  # used again: restarted
    second = live.mcp
    glue.connect(live, [])  # a resume without servers closes the running ones
    assert live.mcp is None and second.closed and live.mcp_servers == []
    assert glue.turn_tools(live, {"x": 1}, lambda p: p) == {"x": 1}


def test_close_all_stops_every_session_in_parallel(root):
    from term2acp.mcp import session as glue
    from term2acp.mcp.config import from_acp

    class Live:
        mcp, mcp_servers = None, ()

        def __init__(self, sid):
            self.id, self.root = sid, root

    lives = [Live("a"), Live("b"), Live("c")]
    for live in lives[:2]:
        glue.connect(live, [from_acp(stdio_entry())])
        assert live.mcp.wait_ready(30)
    pids = [live.mcp.clients[0].transport.pid for live in lives[:2]]
    started = time.perf_counter()
    glue.close_all(lives)
    assert time.perf_counter() - started < 5
    assert all(live.mcp is None for live in lives) and not any(alive(p) for p in pids)
