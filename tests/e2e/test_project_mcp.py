"""The workspace's .mcp.json (turns/projectmcp.py): its servers join the editor's (the
editor's win on a name clash) once the user trusts the file; rejected, nothing starts."""

import hashlib
import json
import os
import sys

import pytest

from term2acp.testing.harness import selected
from tests.support.mcp_servers import server_script, stdio_entry


def call(name, **arguments):
    return {"tool_call": {"name": name, "arguments": arguments}}


def results(updates):
    """The settled tool calls' texts (not the trust question's own call)."""
    trust = {u["toolCallId"] for u in updates if u.get("title", "").startswith("Trust ")}
    return ["".join(c["content"]["text"] for c in u.get("content") or []
                    if c.get("type") == "content" and c["content"].get("type") == "text")
            for u in updates if u["sessionUpdate"] == "tool_call_update"
            and u.get("status") in ("completed", "failed") and u["toolCallId"] not in trust]


def write_mcp_json(workspace, marker):
    """proj: our server, started through sh so a marker file says it ran; clash: a server
    that does not exist, named like the editor's."""
    started = f"touch {marker}; exec {sys.executable} {server_script()} stdio"
    body = json.dumps({"mcpServers": {
        "proj": {"command": "/bin/sh", "args": ["-c", started], "env": {"X_FROM": "project"}},
        "clash": {"command": "/nonexistent/server"}}}, indent=2)
    path = os.path.join(workspace, ".mcp.json")
    with open(path, "w") as fh:
        fh.write(body)
    return path, hashlib.sha256(body.encode()).hexdigest()


def answering(trust, asked):
    def on_request(message):
        options = [o["optionId"] for o in message["params"]["options"]]
        if "trust-always" in options:
            asked.append(message["params"])
            return selected(trust)
        return selected("allow-tool-session")  # the MCP tools' own first-call question
    return on_request


@pytest.mark.acp_process  # through the launcher
@pytest.mark.parametrize("protocol", [1, 2])
def test_mcp_json_servers_join_the_editors_once_trusted(acp_agent, workspace, tmp_path, home,
                                                         protocol):
    marker = tmp_path / "proj-started"
    path, digest = write_mcp_json(workspace, marker)
    turns = [[call("mcp__proj__echo", text="from the project"),
              call("mcp__clash__echo", text="from the editor")], [{"text": "done"}]] * 3
    agent = acp_agent(turns=turns, protocol=protocol, env={"TERM2ACP_HOME": str(home)})
    asked = []

    # rejected: nothing of the file starts; the editor's server works
    sid = agent.new_session(workspace, mcp_servers=[stdio_entry("clash")])
    _, updates, _ = agent.prompt(sid, "go", timeout=60, on_request=answering("reject", asked))
    assert len(asked) == 1
    shown = json.dumps(asked[0])
    assert path in shown and digest in shown and "/nonexistent/server" in shown
    assert not marker.exists()
    unknown, editors = sorted(results(updates))
    assert "Unknown tool 'mcp__proj__echo'" in unknown and editors == "echo: from the editor"

    # allowed always: it starts beside the editor's, which keeps its name
    sid = agent.new_session(workspace, mcp_servers=[stdio_entry("clash")])
    _, updates, _ = agent.prompt(sid, "go", timeout=60,
                                 on_request=answering("trust-always", asked))
    assert len(asked) == 2 and marker.exists()
    assert sorted(results(updates)) == ["echo: from the editor", "echo: from the project"]

    # remembered: the next session does not ask
    sid = agent.new_session(workspace, mcp_servers=[stdio_entry("clash")])
    _, updates, _ = agent.prompt(sid, "go", timeout=60, on_request=answering("reject", asked))
    assert len(asked) == 2
    assert sorted(results(updates)) == ["echo: from the editor", "echo: from the project"]
    assert agent.close() == 0
