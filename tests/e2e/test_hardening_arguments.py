"""Issue 23: a huge tool argument is refused before it is parsed, stored or shown."""

import json
import os

from term2acp.core.nesting import MAX_ARGUMENT_CHARS


def test_a_20_mb_tool_argument_is_refused_before_parsing_storing_or_showing(started, home,
                                                                            workspace):
    huge = json.dumps({"path": "big.txt", "content": "x" * (20 * 1024 * 1024)})
    agent, sid = started([[{"tool_call": {"name": "create_file", "arguments": huge}}],
                          [{"text": "understood"}], [{"text": "next turn"}]])
    _, updates, idle = agent.prompt(sid, "write it", timeout=60)
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    reports = [u for u in updates if u["sessionUpdate"] in ("tool_call", "tool_call_update")]
    assert reports[-1]["status"] == "failed"
    text = reports[-1]["content"][0]["content"]["text"]
    assert f"over the limit of {MAX_ARGUMENT_CHARS:,}" in text
    assert max(len(json.dumps(u)) for u in updates) < 10_000  # never shown
    assert not os.path.exists(os.path.join(workspace, "big.txt"))
    assert agent.request("session/list", {})["result"]["sessions"]
    _, _, idle = agent.prompt(sid, "go on", timeout=30)
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    agent.close()
    stored = sum(os.path.getsize(os.path.join(home, name)) for name in os.listdir(home)
                 if name.startswith("sessions.sqlite3"))
    assert stored < 2 * 1024 * 1024  # never stored
