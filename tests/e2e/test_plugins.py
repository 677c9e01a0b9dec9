"""A synchronous plug-in tool (tests/plugin_example) through the real launcher."""

import configparser
import os

import pytest

from tests.support.scripts import write_script

EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "plugin_example")


@pytest.fixture
def plugin_env(tmp_path):
    """PYTHONPATH with the example package and a dist-info declaring its entry points."""
    config = configparser.ConfigParser()
    config.read(os.path.join(EXAMPLE, "setup.cfg"))
    site = tmp_path / "site"
    info = site / "term2acp_example_tools-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: term2acp-example-tools\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(
        "[term2acp.tools]\n" + config["options.entry_points"]["term2acp.tools"].strip() + "\n")
    return {"PYTHONPATH": os.pathsep.join([str(site), EXAMPLE])}


def call(name, **arguments):
    return {"tool_call": {"name": name, "arguments": arguments}}


def test_plugin_tool_runs_as_a_plain_blocking_function(spawn, workspace, tmp_path, plugin_env):
    with open(os.path.join(workspace, "poem.txt"), "w") as fh:
        fh.write("one two\nthree\n")
    agent = spawn(script=write_script(tmp_path, [[call("word_count", path="poem.txt")], [{"text": "ok"}]]),
                  env=plugin_env)
    agent.initialize()
    sid = agent.new_session(workspace)
    _, updates, _ = agent.prompt(sid, "count")
    done = [u for u in updates if u["sessionUpdate"] == "tool_call_update" and u.get("status") == "completed"]
    assert done[0]["content"][0]["content"]["text"] == "2 lines, 3 words, 14 characters"
    agent.close()


@pytest.mark.parametrize("option", ["approve", "reject"])
def test_plugin_tool_approval_offers_the_ordinary_options(spawn, workspace, tmp_path, plugin_env, option):
    agent = spawn(script=write_script(tmp_path, [[call("append_note", note="remember")], [{"text": "ok"}]]),
                  env=plugin_env)
    agent.initialize()
    sid = agent.new_session(workspace)
    requests = []
    _, updates, _ = agent.prompt(sid, "note", on_request=lambda m: requests.append(m) or
                                 {"outcome": {"outcome": "selected", "optionId": option}})
    assert [(o["optionId"], o["name"], o["kind"]) for o in requests[0]["params"]["options"]] == [
        ("approve", "Allow", "allow_once"), ("reject", "Reject", "reject_once")]
    notes = os.path.join(workspace, "NOTES.md")
    assert os.path.exists(notes) == (option == "approve")
    agent.close()


def test_plugin_exception_becomes_a_failed_tool_call(spawn, workspace, tmp_path, plugin_env):
    agent = spawn(script=write_script(tmp_path, [[call("word_count", path="../../etc/passwd")], [{"text": "ok"}]]),
                  env=plugin_env)
    agent.initialize()
    sid = agent.new_session(workspace)
    _, updates, idle = agent.prompt(sid, "count")
    failed = [u for u in updates if u["sessionUpdate"] == "tool_call_update" and u.get("status") == "failed"]
    assert "outside the workspace" in failed[0]["content"][0]["content"]["text"]
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    agent.close()
