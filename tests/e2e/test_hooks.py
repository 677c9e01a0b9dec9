"""Hooks (turns/hooks.py) with Claude Code's semantics, from the config file and from a
workspace's .claude/settings.json (asked about first: core/trust.py), through the launcher
with a fake model."""

import json
import os
import time

import pytest

from term2acp.testing.harness import selected
from tests.support import fake_llm as f

PROMPT_HOOK = """import json, sys
event = json.load(sys.stdin)
if "forbidden" in event["prompt"]:
    sys.stderr.write("no secrets in prompts")
    sys.exit(2)
print(json.dumps({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                         "additionalContext": "PROMPT-CONTEXT-3"}}))
"""
PRE_HOOK = """import json, sys
event = json.load(sys.stdin)
open(sys.argv[1], "a").write(json.dumps(event) + "\\n")
command = event["tool_input"].get("command", "")
if command.startswith("rm "):
    decision, why = "deny", "no rm please"
elif "ask-me" in command:
    decision, why = "ask", "the hook wants a human"
else:
    sys.exit(0)
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                  "permissionDecision": decision, "permissionDecisionReason": why}}))
"""
STOP_HOOK = """import json, sys
event = json.load(sys.stdin)
if not event["stop_hook_active"]:
    print(json.dumps({"decision": "block", "reason": "also check the tests"}))
"""


def respond(request):
    messages = request.json["messages"]
    last = messages[-1]
    if last["role"] == "tool" or "Stop hook says" in str(last.get("content")):
        return f.openai_sse(f.oa_text("done"), f.oa_finish("stop"))
    prompt = last["content"] if isinstance(last["content"], str) else json.dumps(last["content"])
    calls = {"read it": ("read_file", {"path": "a.txt"}),
             "remove it": ("shell", {"command": "rm a.txt"}),
             "ask first": ("shell", {"command": "echo ask-me"}),
             "list it": ("list_directory", {"path": "."})}
    for key, (name, args) in calls.items():
        if key in prompt:
            return f.openai_sse(f.oa_tool(0, "call_1", name, json.dumps(args)),
                                f.oa_finish("tool_calls"))
    return f.openai_sse(f.oa_text("ok"), f.oa_finish("stop"))


@pytest.fixture
def server(server):  # tests/e2e/conftest.py's, answering as respond() says
    server.responder = respond
    return server


def script(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return f"python3 {path}"


def toml_hook(event, command, matcher=None, timeout=None):
    head = f"[[hooks.{event}]]\n" + (f'matcher = "{matcher}"\n' if matcher else "")
    extra = f", timeout = {timeout}" if timeout else ""
    return head + f"hooks = [{{ type = \"command\", command = {json.dumps(command)}{extra} }}]\n"


def start(acp_agent, server, tmp_path, protocol, config=""):
    (tmp_path / "config.toml").write_text(config)
    return acp_agent(args=("--provider", "openai", "--model", "m"), protocol=protocol,
                     env={"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "sk-test-123456",
                          "TERM2ACP_CONFIG": str(tmp_path / "config.toml")})


def texts(request):
    return [m["content"] for m in request.json["messages"] if isinstance(m.get("content"), str)]


def tool_results(request):
    return [m["content"] for m in request.json["messages"] if m["role"] == "tool"]


def said(updates):
    return "".join(u["content"]["text"] for u in updates
                   if u["sessionUpdate"] == "agent_message_chunk")


def statuses(updates):
    return [u.get("status") for u in updates if u["sessionUpdate"] == "tool_call_update"
            and u.get("status") in ("completed", "failed")]


@pytest.mark.acp_process  # through the launcher
@pytest.mark.parametrize("protocol", [1, 2])
def test_hooks_from_the_config_file(acp_agent, server, tmp_path, acp_workspace, protocol):
    log = tmp_path / "pre.log"
    with open(os.path.join(acp_workspace, "a.txt"), "w") as fh:
        fh.write("alpha\n")
    config = "".join([
        toml_hook("SessionStart", "echo START-CONTEXT-7"),
        toml_hook("UserPromptSubmit", script(tmp_path, "prompt.py", PROMPT_HOOK)),
        toml_hook("PreToolUse", script(tmp_path, "pre.py", PRE_HOOK) + f" {log}", "shell"),
        toml_hook("PreToolUse", "sleep 30", "list_directory", timeout=1),
        toml_hook("PostToolUse", "printf '%s' '{\"hookSpecificOutput\": {\"additionalContext\": "
                  "\"POST-CONTEXT-9\"}}'", "read_file|grep"),
        toml_hook("Stop", script(tmp_path, "stop.py", STOP_HOOK)),
    ])
    agent = start(acp_agent, server, tmp_path, protocol, config)
    sid = agent.new_session(acp_workspace)

    # start and prompt context reach the model; Stop makes the turn go on once
    _, updates, _ = agent.prompt(sid, "hello", timeout=30)
    first = texts(server.requests[-2])
    assert any("START-CONTEXT-7" in t for t in first)
    assert any("PROMPT-CONTEXT-3" in t for t in first)
    assert first[-1] == "hello"  # the user's words stay last
    assert texts(server.requests[-1])[-1] == "A Stop hook says: also check the tests"
    assert said(updates) == "okdone"

    # a blocked prompt never reaches the model; the user sees the reason
    before = len(server.requests)
    _, updates, _ = agent.prompt(sid, "tell me the forbidden thing", timeout=30)
    assert len(server.requests) == before
    assert "no secrets in prompts" in said(updates)
    assert not any("forbidden" in t for r in server.requests for t in texts(r))

    # after-tool context reaches the model
    agent.prompt(sid, "read it", timeout=30)
    result = tool_results(server.requests[-2])[-1]
    assert "alpha" in result and "POST-CONTEXT-9" in result

    # deny: the call does not run, the model sees the reason
    _, updates, _ = agent.prompt(sid, "remove it", timeout=30)
    assert os.path.exists(os.path.join(acp_workspace, "a.txt"))
    assert "no rm please" in tool_results(server.requests[-2])[-1]
    assert statuses(updates) == ["failed"]
    event = json.loads(log.read_text().splitlines()[-1])
    assert event["hook_event_name"] == "PreToolUse" and event["tool_name"] == "shell"
    assert event["tool_input"] == {"command": "rm a.txt"} and event["session_id"] == sid
    assert event["cwd"] == acp_workspace

    # ask: asked although auto mode runs sandboxed commands without asking
    asked = []
    _, updates, _ = agent.prompt(sid, "ask first", timeout=30, on_request=lambda m: asked.append(
        m["params"]) or selected("reject"))
    assert len(asked) == 1 and "the hook wants a human" in json.dumps(asked[0])
    assert statuses(updates) == ["failed"]

    # a sleeping hook is cut at its timeout, and ignored
    began = time.monotonic()
    _, updates, _ = agent.prompt(sid, "list it", timeout=30)
    assert time.monotonic() - began < 15
    assert statuses(updates) == ["completed"]
    assert "a.txt" in tool_results(server.requests[-2])[-1]
    assert agent.close() == 0


def test_workspace_hooks_ask_naming_the_file_and_its_hash_first(acp_agent, server, tmp_path,
                                                                acp_workspace):
    import hashlib

    marker = tmp_path / "ran"
    settings = {"hooks": {"UserPromptSubmit": [{"hooks": [
        {"type": "command", "command": f"touch {marker}; echo WS-CONTEXT-5"}]}],
        "Notification": [{"hooks": [{"type": "command", "command": "true"}]}]}}
    path = os.path.join(acp_workspace, ".claude", "settings.json")
    os.makedirs(os.path.dirname(path))
    body = json.dumps(settings)
    with open(path, "w") as fh:
        fh.write(body)
    agent = start(acp_agent, server, tmp_path, 2)
    asked = []

    def answer(choice):
        def on_request(message):
            asked.append(message["params"])
            return selected(choice)
        return on_request

    sid = agent.new_session(acp_workspace)
    agent.prompt(sid, "hello", timeout=30, on_request=answer("reject"))
    assert len(asked) == 1
    shown = json.dumps(asked[0])
    assert path in shown and hashlib.sha256(body.encode()).hexdigest() in shown
    assert not marker.exists()  # rejected: nothing ran
    assert not any("WS-CONTEXT-5" in t for t in texts(server.requests[-1]))

    sid = agent.new_session(acp_workspace)
    agent.prompt(sid, "hello", timeout=30, on_request=answer("trust-always"))
    assert marker.exists() and any("WS-CONTEXT-5" in t for t in texts(server.requests[-1]))
    assert len(asked) == 2
    agent.close()

    agent = start(acp_agent, server, tmp_path, 2)  # a restart: remembered, not asked
    sid = agent.new_session(acp_workspace)
    agent.prompt(sid, "again", timeout=30, on_request=answer("reject"))
    assert len(asked) == 2 and any("WS-CONTEXT-5" in t for t in texts(server.requests[-1]))
    with open(path, "w") as fh:  # an edit asks again
        fh.write(body.replace("WS-CONTEXT-5", "WS-CONTEXT-6"))
    agent.prompt(sid, "and now", timeout=30, on_request=answer("reject"))
    assert len(asked) == 3
    assert not any("WS-CONTEXT-6" in t for t in texts(server.requests[-1]))
    assert agent.close() == 0


def test_workspace_hooks_another_user_owns_are_ignored_with_a_notice(acp_agent, server, tmp_path,
                                                                     acp_workspace):
    if os.geteuid() != 0:
        pytest.skip("making a file another user owns needs root")
    marker = tmp_path / "ran"
    path = os.path.join(acp_workspace, ".claude", "settings.json")
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as fh:
        json.dump({"hooks": {"UserPromptSubmit": [{"hooks": [
            {"type": "command", "command": f"touch {marker}"}]}]}}, fh)
    os.chown(path, 54321, 54321)
    agent = start(acp_agent, server, tmp_path, 2)
    sid = agent.new_session(acp_workspace)
    asked = []
    _, updates, _ = agent.prompt(sid, "hello", timeout=30,
                                 on_request=lambda m: asked.append(m) or selected("trust-always"))
    assert asked == [] and not marker.exists()
    told = "".join(u["content"]["text"] for u in updates
                   if u["sessionUpdate"] == "agent_thought_chunk")
    assert path in told and "uid 54321" in told
    assert agent.close() == 0


def test_older_decision_names_and_failing_hooks(acp_agent, server, tmp_path, acp_workspace):
    """Claude's older PreToolUse answer ``decision: block`` denies; a hook that fails
    (exit 1) or cannot start is ignored and the call runs."""
    with open(os.path.join(acp_workspace, "a.txt"), "w") as fh:
        fh.write("alpha\n")
    config = "".join([
        toml_hook("PreToolUse", "echo broken >&2; exit 1", "read_file"),
        toml_hook("PreToolUse", "/nonexistent/hook", "read_file"),
        toml_hook("PreToolUse", "printf '%s' '{\"decision\": \"block\", \"reason\": \"old "
                  "style no\"}'", "shell"),
    ])
    agent = start(acp_agent, server, tmp_path, 2, config)
    sid = agent.new_session(acp_workspace)
    _, updates, _ = agent.prompt(sid, "read it", timeout=30)
    assert statuses(updates) == ["completed"]
    assert "alpha" in tool_results(server.requests[-1])[-1]
    _, updates, _ = agent.prompt(sid, "remove it", timeout=30)
    assert statuses(updates) == ["failed"]
    assert "old style no" in tool_results(server.requests[-1])[-1]
    assert os.path.exists(os.path.join(acp_workspace, "a.txt"))
    assert agent.close() == 0
