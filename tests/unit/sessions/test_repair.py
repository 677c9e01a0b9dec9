"""What a killed process leaves open is closed as interrupted (history and journal)."""

from term2acp.sessions import repair


def call(call_id, name="read_file"):
    return {"id": call_id, "name": name, "arguments": "{}"}


def result(call_id):
    return {"role": "tool", "tool_call_id": call_id, "name": "read_file", "content": "ok"}


def test_repair_history_answers_every_unanswered_call_in_place():
    messages = [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "", "tool_calls": [call("a"), call("b")]},
        result("a"),
        {"role": "user", "content": "two"},  # a turn killed between two calls, then resumed
        {"role": "assistant", "content": "", "tool_calls": [call("c", "shell")]},
    ]
    fixed, repaired = repair.history(messages)
    assert repaired
    assert [(m["role"], m.get("tool_call_id")) for m in fixed] == [
        ("user", None), ("assistant", None), ("tool", "a"), ("tool", "b"), ("user", None),
        ("assistant", None), ("tool", "c")]
    assert fixed[3]["is_error"] and "Interrupted" in fixed[3]["content"]
    assert fixed[6]["name"] == "shell"


def test_repair_history_leaves_a_complete_conversation_alone():
    messages = [{"role": "user", "content": "x"},
                {"role": "assistant", "content": "", "tool_calls": [call("a")]}, result("a"),
                {"role": "assistant", "content": "done", "tool_calls": []}]
    assert repair.history(messages) == (messages, False)


def test_repair_journal_fails_open_calls_and_ends_running_terminals():
    records = [
        ("user_message", {"message_id": "u"}),
        ("tool_call", {"call_id": "t1", "status": "completed"}),
        ("tool_call", {"call_id": "t2", "status": "in_progress", "title": "shell"}),
        ("tool_call", {"call_id": "t3", "status": "pending"}),
        ("terminal", {"terminal_id": "term1", "command": "sleep 9", "cwd": "/w", "output": ""}),
        ("terminal", {"terminal_id": "term2", "command": "true", "cwd": "/w", "output": "",
                      "exit": {"exit_code": 0, "signal": None}}),
    ]
    fixed = list(repair.journal(records))
    assert [(kind, key) for kind, key, _ in fixed] == [
        ("tool_call", "t2"), ("tool_call", "t3"), ("terminal", "terminal:term1")]
    assert fixed[0][2]["status"] == "failed" and fixed[0][2]["title"] == "shell"
    assert "Interrupted" in fixed[0][2]["content"][0]["text"]
    assert fixed[2][2]["exit"] == {"exit_code": None, "signal": "SIGKILL"}
