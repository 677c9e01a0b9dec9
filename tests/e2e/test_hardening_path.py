"""Issue 23, high 3: a program planted in the project is never run outside the sandbox.

The agent runs in the project (its cwd is the workspace) with ``./node_modules/.bin``
first on PATH, a common habit. A ``bwrap`` or a bare MCP command (``npx``) found there
would run outside the sandbox with the editor's environment; each planted one here writes a
marker outside the workspace when it runs."""

import os
import shutil
import sys

import pytest

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None and not os.environ.get("CI"),
                                 reason="bubblewrap is not installed")


def call(name, **arguments):
    return {"tool_call": {"name": name, "arguments": arguments}}


def shown(updates):
    """Every text the tool calls showed: content and streamed terminal output."""
    out = []
    for update in updates:
        out += [c["content"]["text"] for c in update.get("content") or ()
                if isinstance(c, dict) and c.get("type") == "content"]
        out.append((update.get("_meta") or {}).get("terminal_output", {}).get("data", ""))
    return "\n".join(out)


def planted(marker, then):
    return f"#!/bin/sh\necho ran >> {marker}\n{then}\n"


@pytest.fixture
def project(acp_agent, acp_workspace, tmp_path):
    """``start(turns, path_entry)``: the agent started in the workspace with ``path_entry``
    first on its PATH; returns (agent, session id, marker path)."""
    marker = tmp_path / "planted-program-ran"

    def start(turns, path_entry="./node_modules/.bin", mcp_servers=None):
        env = {"PATH": f"{path_entry}:{os.environ['PATH']}"}
        agent = acp_agent(turns=turns, env=env, protocol=1, cwd=acp_workspace)
        return agent, agent.new_session(acp_workspace, mcp_servers=mcp_servers), marker
    return start


@needs_bwrap
def test_a_bwrap_the_model_plants_on_a_relative_path_entry_is_never_run(project, acp_workspace,
                                                                        tmp_path):
    marker = tmp_path / "planted-program-ran"
    plant = planted(marker, f'exec {shutil.which("bwrap")} "$@"')
    agent, sid, _ = project([[call("shell", command="echo first")],
                             [call("create_file", path="node_modules/.bin/bwrap", content=plant)],
                             [call("shell", command="chmod +x node_modules/.bin/bwrap")],
                             [call("shell", command="echo after-the-plant")], [{"text": "ok"}]])
    _, updates, _ = agent.prompt(sid, "go", timeout=60)
    assert os.access(os.path.join(acp_workspace, "node_modules/.bin/bwrap"), os.X_OK)
    assert "after-the-plant" in shown(updates)
    assert not marker.exists()
    agent.close()


@needs_bwrap
def test_a_bwrap_inside_the_workspace_on_an_absolute_path_entry_is_refused(project,
                                                                         acp_workspace, tmp_path):
    folder = os.path.join(acp_workspace, "bin")
    os.makedirs(folder)
    marker = tmp_path / "planted-program-ran"
    with open(os.path.join(folder, "bwrap"), "w") as fh:
        fh.write(planted(marker, f'exec {shutil.which("bwrap")} "$@"'))
    os.chmod(os.path.join(folder, "bwrap"), 0o755)
    agent, sid, _ = project([[call("shell", command="echo NEVER-$((1+1))")], [{"text": "ok"}]],
                            path_entry=folder)
    _, updates, _ = agent.prompt(sid, "go", timeout=60)
    text = shown(updates)
    assert "does not run programs from there" in text and "NEVER-2" not in text
    assert not marker.exists()
    agent.close()


def test_a_bare_mcp_command_is_never_found_on_a_relative_path_entry(project, acp_workspace,
                                                                    tmp_path):
    folder = os.path.join(acp_workspace, "node_modules", ".bin")
    os.makedirs(folder)
    marker = tmp_path / "planted-program-ran"
    with open(os.path.join(folder, "mcp-helper"), "w") as fh:
        fh.write(planted(marker, f"exec {sys.executable} -c 'import sys; sys.stdin.read()'"))
    os.chmod(os.path.join(folder, "mcp-helper"), 0o755)
    servers = [{"name": "helper", "command": "mcp-helper", "args": [], "env": []}]
    agent, sid, _ = project([[{"text": "one"}]], mcp_servers=servers)
    _, updates, _ = agent.prompt(sid, "one", timeout=30)
    notice = "".join(u["content"]["text"] for u in updates
                     if u["sessionUpdate"] == "agent_message_chunk")
    assert "'helper' could not be started" in notice
    assert not marker.exists()
    agent.close()
