"""Zed's terminal on v1: a call of kind execute announces ``_meta.terminal_info``, its
output goes out as ``_meta.terminal_output`` deltas and its end as ``_meta.terminal_exit``;
other clients keep the text view. Every update validates against the v1 schema."""

import base64

from term2acp.acp.capabilities import terminal_output_meta
from term2acp.acp.v1 import translate as v1
from term2acp.core import events as ev
from term2acp.testing import schema


def valid(update):
    message = {"jsonrpc": "2.0", "method": "session/update",
               "params": {"sessionId": "s", "update": update}}
    assert schema.check_message(message, {}, 1) == []
    return update


def run_command(view, call_id="tc_1", chunks=(b"hel", b"lo \xe2\x82", b"\xac\n"), code=0):
    events = [
        ev.ToolCallReported(call_id, title="echo", kind="execute", status="pending",
                            raw_input={"command": "echo"}, name="shell"),
        ev.ToolCallReported(call_id, status="in_progress"),
        ev.TerminalStarted("term-1", "echo", "/w", call_id=call_id),
        *(ev.TerminalOutput("term-1", c) for c in chunks),
        ev.TerminalExited("term-1", exit_code=code),
        ev.ToolCallReported(call_id, status="completed" if code == 0 else "failed",
                            content=[{"type": "terminal", "terminal_id": "term-1"}],
                            raw_output={"exitCode": code}),
    ]
    return [valid(u) for e in events for u in view.updates(e)]


def test_the_capability_is_meta_terminal_output_true():
    assert terminal_output_meta({"_meta": {"terminal_output": True, "terminal-auth": True}})
    assert not terminal_output_meta({"_meta": {"terminal_output": "yes"}})
    assert not terminal_output_meta({"terminal": True}) and not terminal_output_meta(None)


def test_zed_sees_the_terminal_triple_with_deltas_and_the_exit_code():
    view = v1.SessionView("/w")
    view.terminal_meta = True
    updates = run_command(view)
    first = updates[0]
    assert first["sessionUpdate"] == "tool_call"
    assert first["_meta"] == {"terminal_info": {"terminal_id": "tc_1", "cwd": "/w"}}
    assert first["content"] == [{"type": "terminal", "terminalId": "tc_1"}]
    deltas = [u["_meta"]["terminal_output"] for u in updates
              if "terminal_output" in u.get("_meta", {})]
    assert all(d["terminal_id"] == "tc_1" for d in deltas)
    assert [d["data"] for d in deltas] == ["hel", "lo ", "\u20ac\n"]  # split UTF-8 kept whole
    exits = [u for u in updates if "terminal_exit" in u.get("_meta", {})]
    assert exits[0]["_meta"]["terminal_exit"] == {"terminal_id": "tc_1", "exit_code": 0,
                                                  "signal": None}
    final = updates[-1]
    assert final["status"] == "completed" and updates.index(exits[0]) < len(updates) - 1
    assert final["content"] == [{"type": "terminal", "terminalId": "tc_1"}]
    assert not any("```" in str(u) for u in updates)  # no text view


def test_a_signal_ends_with_a_null_exit_code():
    view = v1.SessionView("/w")
    view.terminal_meta = True
    updates = [valid(u) for e in (
        ev.ToolCallReported("tc_2", title="sleep", kind="execute", status="pending",
                            name="shell"),
        ev.TerminalStarted("term-2", "sleep", "/w", call_id="tc_2"),
        ev.TerminalExited("term-2", exit_code=None, signal="SIGKILL")) for u in view.updates(e)]
    assert updates[-1]["_meta"]["terminal_exit"] == {"terminal_id": "tc_2", "exit_code": None,
                                                     "signal": "SIGKILL"}


def test_other_clients_keep_the_text_view():
    view = v1.SessionView("/w")
    updates = run_command(view)
    assert not any("_meta" in u for u in updates)
    assert "hello \u20ac" in updates[-1]["content"][0]["content"]["text"]


def test_calls_side_by_side_keep_their_own_terminals():
    """Two commands of one round run at once: each output goes to its own call."""
    for zed in (True, False):
        view = v1.SessionView("/w")
        view.terminal_meta = zed
        out = []
        for call in ("a", "b"):
            out += view.updates(ev.ToolCallReported(call, title=call, kind="execute",
                                                    status="pending", name="shell"))
            out += view.updates(ev.ToolCallReported(call, status="in_progress"))
        out += view.updates(ev.TerminalStarted("t-a", "a", "/w", call_id="a"))
        out += view.updates(ev.TerminalStarted("t-b", "b", "/w", call_id="b"))
        out += view.updates(ev.TerminalOutput("t-a", b"from a"))
        out += view.updates(ev.TerminalOutput("t-b", b"from b"))
        for update in out:
            valid(update)
            text = str(update)
            if "from a" in text:
                assert update["toolCallId"] == "a" and "from b" not in text
            if "from b" in text:
                assert update["toolCallId"] == "b"


def test_session_load_replays_the_terminal_for_zed():
    records = [
        ("terminal", {"terminal_id": "term-1", "command": "echo hi", "cwd": "/w",
                      "output": base64.b64encode(b"hi\n").decode(),
                      "exit": {"exit_code": 3, "signal": None}}),
        ("tool_call", {"call_id": "tc_1", "title": "echo hi", "kind": "execute",
                       "status": "failed", "name": "shell",
                       "content": [{"type": "terminal", "terminal_id": "term-1"}]}),
    ]
    updates = [valid(u) for u in v1.replay_updates(records, terminal_meta=True)]
    assert updates[0]["_meta"] == {"terminal_info": {"terminal_id": "tc_1", "cwd": "/w"}}
    assert updates[1]["_meta"]["terminal_output"]["data"] == "hi\n"
    assert updates[2]["_meta"]["terminal_exit"]["exit_code"] == 3
    assert updates[3]["status"] == "failed"
    assert updates[3]["content"] == [{"type": "terminal", "terminalId": "tc_1"}]
    plain = list(v1.replay_updates(records))
    assert "hi" in plain[-1]["content"][0]["content"]["text"] and "_meta" not in plain[0]


def test_a_background_process_streams_into_its_calls_terminal_until_it_exits():
    view = v1.SessionView("/w")
    view.terminal_meta = True
    out = []
    for e in (ev.ToolCallReported("bg", title="serve", kind="execute", status="pending",
                                  name="shell"),
              ev.ToolCallReported("bg", status="in_progress"),
              ev.TerminalStarted("t-bg", "serve", "/w", call_id="bg"),
              ev.TerminalOutput("t-bg", b"listening\n"),
              ev.ToolCallReported("bg", status="completed",
                                  content=[{"type": "terminal", "terminal_id": "t-bg"}])):
        out += view.updates(e)
    view.turn_ended()
    later = view.updates(ev.TerminalOutput("t-bg", b"GET /\n"))
    later += view.updates(ev.TerminalExited("t-bg", exit_code=None, signal="SIGTERM"))
    for update in out + later:
        valid(update)
    assert out[-1]["content"] == [{"type": "terminal", "terminalId": "bg"}]
    assert later[0]["_meta"]["terminal_output"] == {"terminal_id": "bg", "data": "GET /\n"}
    assert later[1]["_meta"]["terminal_exit"] == {"terminal_id": "bg", "exit_code": None,
                                                  "signal": "SIGTERM"}
    assert view.streams == {}  # forgotten once it exited
    assert view.updates(ev.TerminalOutput("t-bg", b"late")) == []


def test_other_execute_tools_get_no_terminal():
    view = v1.SessionView("/w")
    view.terminal_meta = True
    first = view.updates(ev.ToolCallReported("k", title="shell_kill", kind="execute",
                                             status="pending", name="shell_kill"))[0]
    assert "_meta" not in first and "content" not in first


def test_a_sub_agents_command_keeps_both_its_parent_and_zeds_terminal_in_meta():
    view = v1.SessionView("/w")
    view.terminal_meta = True
    events = [ev.ToolCallReported("tc_2", title="echo", kind="execute", status="pending",
                                  raw_input={"command": "echo"}, name="shell", parent="tc_1"),
              ev.ToolCallReported("tc_2", status="completed", parent="tc_1",
                                  content=[{"type": "text", "text": "done"}])]
    first, last = [valid(u) for e in events for u in view.updates(e)]
    assert first["_meta"] == {"terminal_info": {"terminal_id": "tc_2", "cwd": "/w"},
                              "term2": {"parentToolCallId": "tc_1"}}
    assert last["_meta"] == {"term2": {"parentToolCallId": "tc_1"}}
