"""Editor controls over the real launcher, on v1 and v2 (issue 15): config options (model,
effort, mode), v1 modes, each mode's rule, slash commands, update_plan, resume restoring
the choices. Every message is validated against the connection's schema by the kit."""

import os
import shutil

import pytest

from term2acp.testing.harness import is_response
from tests.support import fake_llm as f

PROTOCOLS = pytest.mark.parametrize("protocol", [1, 2])
HAS_BWRAP = shutil.which("bwrap") is not None


def call(name, **arguments):
    return {"tool_call": {"name": name, "arguments": arguments}}


def option_key(protocol):
    return "id" if protocol == 1 else "configId"


def options_by_id(options, protocol):
    return {o[option_key(protocol)]: o for o in options}


def new_session(agent, workspace):
    response = agent.request("session/new", {"cwd": workspace, "mcpServers": []})
    assert "result" in response, response
    return response["result"]


def set_option(agent, sid, config_id, value):
    return agent.request("session/set_config_option",
                         {"sessionId": sid, "configId": config_id, "value": value})


def finals(updates):
    statuses = {}
    for u in updates:
        if u["sessionUpdate"] in ("tool_call", "tool_call_update") and "status" in u:
            statuses[u["toolCallId"]] = u
    return list(statuses.values())


def texts(updates, kind="agent_message_chunk"):
    return "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == kind)


def answering(option_id, seen):
    def answer(message):
        if message["method"] == "session/request_permission":
            seen.append(message)
            return {"outcome": {"outcome": "selected", "optionId": option_id}}
        return None
    return answer


def stop_reason(protocol, end):
    return end["result"]["stopReason"] if protocol == 1 else \
        end["params"]["update"]["stopReason"]


def seen_or_next(agent, sid, kind):
    """The first ``kind`` update of ``sid`` already received, else the next one."""
    for message in agent.messages:
        if message.get("method") == "session/update" and message["params"]["sessionId"] == sid \
                and message["params"]["update"]["sessionUpdate"] == kind:
            return message["params"]["update"]
    return agent.wait_update(kind, session_id=sid)


# ---------------------------------------------------------------- the options
@PROTOCOLS
def test_options_have_the_right_categories_and_values(acp_agent, acp_workspace, protocol):
    agent = acp_agent(turns=[[{"text": "hi"}]], protocol=protocol)
    result = new_session(agent, acp_workspace)
    options = options_by_id(result["configOptions"], protocol)
    assert [(k, o["category"], o["type"]) for k, o in options.items()] == [
        ("model", "model", "select"), ("effort", "thought_level", "select"),
        ("mode", "mode", "select")]
    assert options["model"]["currentValue"] == "scripted"
    assert [v["value"] for v in options["model"]["options"]] == ["scripted"]
    assert [v["value"] for v in options["effort"]["options"]] == ["default", "low", "medium",
                                                                   "high"]
    assert options["mode"]["currentValue"] == "auto"
    assert [v["value"] for v in options["mode"]["options"]] == ["read-only", "plan", "ask", "auto"]
    if protocol == 1:
        assert result["modes"]["currentModeId"] == "auto"
        assert [m["id"] for m in result["modes"]["availableModes"]] == ["read-only", "plan", "ask", "auto"]
    else:
        assert "modes" not in result
    commands = seen_or_next(agent, result["sessionId"], "available_commands_update")
    names = [c["name"] for c in commands["availableCommands"]]
    assert names[:7] == ["compact", "init", "model", "mode", "undo", "rename", "rewind"]
    hint = {"hint": "model id"} if protocol == 1 else {"type": "text", "hint": "model id"}
    assert commands["availableCommands"][2]["input"] == hint
    agent.close()


@PROTOCOLS
def test_effort_offers_only_what_the_model_supports_and_resets_on_a_model_change(
        acp_agent, acp_workspace, tmp_path, protocol):
    config = tmp_path / "config.toml"
    config.write_text('[providers.box]\ntype = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
                      'models = ["thinker"]\nreasoning = ["low", "high"]\n')
    agent = acp_agent(args=["--provider", "box", "--model", "thinker"], protocol=protocol,
                      env={"TERM2ACP_CONFIG": str(config)})
    sid = new_session(agent, acp_workspace)["sessionId"]
    answer = set_option(agent, sid, "effort", "high")
    options = options_by_id(answer["result"]["configOptions"], protocol)
    assert [v["value"] for v in options["effort"]["options"]] == ["default", "low", "high"]
    assert options["effort"]["currentValue"] == "high"
    error = set_option(agent, sid, "effort", "medium")["error"]
    assert error["code"] == -32602 and "low, high" in error["message"]
    answer = set_option(agent, sid, "model", "other-model")  # a server id: unknown efforts
    options = options_by_id(answer["result"]["configOptions"], protocol)
    assert options["model"]["currentValue"] == "other-model"
    assert options["effort"]["currentValue"] == "high"  # still supported: kept
    agent.close()


@pytest.fixture
def server():
    srv = f.FakeLLMServer().start()
    yield srv
    srv.stop()


def _answer(text):
    return f.openai_sse(f.oa_text(text), f.oa_finish("stop"))


@PROTOCOLS
def test_changing_the_model_changes_the_model_id_the_provider_receives(
        acp_agent, acp_workspace, server, protocol):
    server.models = ["qwen/qwen3-coder", "llama-3.3"]
    server.enqueue(_answer("one"), _answer("two"), _answer("three"))
    agent = acp_agent(args=["--provider", "openai", "--model", "first-model"], protocol=protocol,
                      env={"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "sk-abc"})
    sid = new_session(agent, acp_workspace)["sessionId"]
    agent.prompt(sid, "hi")
    # the server's listing arrives in the background as a config_option_update
    listed = seen_or_next(agent, sid, "config_option_update")
    models = options_by_id(listed["configOptions"], protocol)["model"]
    assert {"qwen/qwen3-coder", "llama-3.3"} <= {v["value"] for v in models["options"]}
    assert set_option(agent, sid, "model", "qwen/qwen3-coder")["result"]
    agent.prompt(sid, "again")
    _, updates, _ = agent.prompt(sid, "/model llama-3.3")
    assert "Model set to llama-3.3." in texts(updates)
    agent.prompt(sid, "last")
    sent = [r.json["model"] for r in server.wait_requests(3)]
    assert sent == ["first-model", "qwen/qwen3-coder", "llama-3.3"]
    assert [r.method for r in server.listings] == ["GET"]
    agent.close()


def test_model_ids_with_a_slash_pass_through_with_model_flag(acp_agent, acp_workspace, server):
    server.enqueue(_answer("ok"))
    agent = acp_agent(args=["--model", "qwen/qwen3-coder"],
                      env={"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "sk-abc"})
    sid = new_session(agent, acp_workspace)["sessionId"]
    agent.prompt(sid, "hi")
    assert server.wait_requests(1)[0].json["model"] == "qwen/qwen3-coder"
    agent.close()


# ---------------------------------------------------------------- the modes
def _mode_session(acp_agent, workspace, protocol, mode, turns, how="config"):
    agent = acp_agent(turns=turns, protocol=protocol)
    sid = new_session(agent, workspace)["sessionId"]
    if how == "set_mode":
        assert agent.request("session/set_mode", {"sessionId": sid, "modeId": mode})["result"] == {}
    else:
        assert "result" in set_option(agent, sid, "mode", mode)
    return agent, sid


def _three_calls(workspace, outside):
    calls = [call("create_file", path="inside.txt", content="in\n"),
             call("create_file", path=os.path.join(outside, "out.txt"), content="out\n")]
    if HAS_BWRAP:
        calls.append(call("shell", command="echo ran > ran.txt"))
    return [[c] for c in calls] + [[{"text": "done"}]]


@pytest.fixture
def outside(tmp_path):
    path = tmp_path / "outside"
    path.mkdir()
    return os.path.realpath(path)


@PROTOCOLS
def test_read_only_refuses_writes_and_shell_without_asking(acp_agent, acp_workspace, outside,
                                                           protocol):
    agent, sid = _mode_session(acp_agent, acp_workspace, protocol, "read-only",
                               _three_calls(acp_workspace, outside),
                               how="set_mode" if protocol == 1 else "config")
    seen = []
    _, updates, end = agent.prompt(sid, "change things", on_request=answering("approve", seen))
    assert seen == []  # never asked
    calls = finals(updates)
    assert len(calls) == (3 if HAS_BWRAP else 2)
    assert all(c["status"] == "failed" for c in calls)
    assert "read-only mode" in calls[0]["content"][0]["content"]["text"]
    assert not os.path.exists(os.path.join(acp_workspace, "inside.txt"))
    assert not os.path.exists(os.path.join(outside, "out.txt"))
    assert not os.path.exists(os.path.join(acp_workspace, "ran.txt"))
    assert stop_reason(protocol, end) == "end_turn"
    if protocol == 1:  # set_mode and the mode option are one state
        assert any(u["sessionUpdate"] == "current_mode_update" and u["currentModeId"] == "read-only"
                   for m in agent.messages if m.get("method") == "session/update"
                   for u in [m["params"]["update"]])
    agent.close()


@PROTOCOLS
def test_read_only_mode_is_told_to_the_model(acp_agent, acp_workspace, server, protocol):
    server.enqueue(_answer("ok"))
    agent = acp_agent(args=["--provider", "openai", "--model", "m"], protocol=protocol,
                      env={"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "sk-abc"})
    sid = new_session(agent, acp_workspace)["sessionId"]
    set_option(agent, sid, "mode", "read-only")
    agent.prompt(sid, "hi")
    messages = server.wait_requests(1)[0].json["messages"]
    assert "READ-ONLY" not in messages[0]["content"]  # the system prompt never changes
    note, prompt = messages[-2:]  # a context note, just before the prompt
    assert "READ-ONLY mode" in note["content"] and prompt["content"] == "hi"
    agent.close()


@PROTOCOLS
def test_ask_asks_for_every_write_and_command_and_ignores_grants(acp_agent, acp_workspace,
                                                                 outside, protocol):
    turns = _three_calls(acp_workspace, outside)
    # a second write outside the same folder: an earlier "allow folder" grant is not consulted
    turns.insert(-1, [call("create_file", path=os.path.join(outside, "again.txt"),
                           content="again\n")])
    agent, sid = _mode_session(acp_agent, acp_workspace, protocol, "ask", turns)
    seen = []

    def answer(message):
        if message["method"] != "session/request_permission":
            return None
        seen.append(message)
        ids = [o["optionId"] for o in message["params"]["options"]]
        choice = "allow-edit-folder-session" if "allow-edit-folder-session" in ids else ids[0]
        return {"outcome": {"outcome": "selected", "optionId": choice}}

    _, updates, end = agent.prompt(sid, "change things", on_request=answer)
    assert len(seen) == (4 if HAS_BWRAP else 3)  # every write and every command asked
    offered = [[o["optionId"] for o in m["params"]["options"]] for m in seen]
    # writes: plain questions, nothing to remember for the session; the command: ask mode's
    # own grant, for commands that start with the same words (tools/shell_policy.py)
    command = ["allow-once", "allow-command-prefix-session", "reject"]
    writes = [["approve", "reject"]] * 3
    assert offered == (writes[:2] + [command] + writes[2:] if HAS_BWRAP else writes)
    assert all(c["status"] == "completed" for c in finals(updates))
    assert open(os.path.join(acp_workspace, "inside.txt")).read() == "in\n"
    assert open(os.path.join(outside, "again.txt")).read() == "again\n"
    assert stop_reason(protocol, end) == "end_turn"
    agent.close()


@PROTOCOLS
def test_auto_writes_inside_and_runs_sandboxed_commands_and_asks_outside(
        acp_agent, acp_workspace, outside, protocol):
    agent = acp_agent(turns=_three_calls(acp_workspace, outside), protocol=protocol)
    sid = new_session(agent, acp_workspace)["sessionId"]
    seen = []
    _, updates, _ = agent.prompt(sid, "change things", on_request=answering("reject", seen))
    assert len(seen) == 1  # only the edit outside the root asks
    params = seen[0]["params"]
    target = params["toolCall"] if protocol == 1 else params["subject"]["toolCall"]
    assert target["rawInput"]["path"].endswith("out.txt")
    statuses = [c["status"] for c in finals(updates)]
    assert statuses == ["completed", "failed"] + (["completed"] if HAS_BWRAP else [])
    assert open(os.path.join(acp_workspace, "inside.txt")).read() == "in\n"
    if HAS_BWRAP:
        assert open(os.path.join(acp_workspace, "ran.txt")).read() == "ran\n"
    agent.close()


def test_the_default_mode_comes_from_the_config_file(acp_agent, acp_workspace, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('mode = "ask"\n')
    agent = acp_agent(turns=[[{"text": "hi"}]], env={"TERM2ACP_CONFIG": str(config)})
    options = options_by_id(new_session(agent, acp_workspace)["configOptions"], 2)
    assert options["mode"]["currentValue"] == "ask"
    agent.close()


# ---------------------------------------------------------------- slash commands
@PROTOCOLS
def test_a_command_ends_its_turn_and_is_replayed_as_the_users_message(acp_agent, acp_workspace,
                                                                     protocol):
    # the scripted model plays turn N for a history with N assistant messages: the
    # command's answer is one of them (turn 0 is never played)
    agent = acp_agent(turns=[[{"text": "not played"}], [{"text": "from the model"}]],
                      protocol=protocol)
    sid = new_session(agent, acp_workspace)["sessionId"]
    _, updates, end = agent.prompt(sid, "/mode ask")
    assert stop_reason(protocol, end) == "end_turn"
    assert texts(updates) == "Mode set to ask."
    assert any(u["sessionUpdate"] == "config_option_update" for u in updates)
    # an unknown /word goes to the model unchanged
    _, updates, _ = agent.prompt(sid, "/help me")
    assert texts(updates) == "from the model"
    agent.close()
    again = acp_agent(turns=[], protocol=protocol)
    if protocol == 1:
        answer = again.request("session/load", {"sessionId": sid, "cwd": acp_workspace,
                                                "mcpServers": []})
        users = [m["params"]["update"]["content"]["text"] for m in again.messages
                 if m.get("method") == "session/update"
                 and m["params"]["update"]["sessionUpdate"] == "user_message_chunk"]
        assert answer["result"]["modes"]["currentModeId"] == "ask"
    else:
        answer = again.request("session/resume", {"sessionId": sid, "cwd": acp_workspace,
                                                  "replayFrom": {"type": "start"}})
        users = [m["params"]["update"]["content"][0]["text"] for m in again.messages
                 if m.get("method") == "session/update"
                 and m["params"]["update"]["sessionUpdate"] == "user_message"]
    assert users == ["/mode ask", "/help me"]
    assert options_by_id(answer["result"]["configOptions"], protocol)["mode"]["currentValue"] \
        == "ask"
    again.close()


@PROTOCOLS
def test_init_asks_the_model_to_write_agents_md_through_the_tools(acp_agent, acp_workspace,
                                                                  protocol):
    agent = acp_agent(turns=[[call("create_file", path="AGENTS.md", content="# Agents\n")],
                             [{"text": "Wrote AGENTS.md"}]], protocol=protocol)
    sid = new_session(agent, acp_workspace)["sessionId"]
    _, updates, end = agent.prompt(sid, "/init")
    assert stop_reason(protocol, end) == "end_turn"
    assert open(os.path.join(acp_workspace, "AGENTS.md")).read() == "# Agents\n"
    assert texts(updates) == "Wrote AGENTS.md"
    agent.close()


@PROTOCOLS
def test_init_in_read_only_mode_is_refused_with_a_message(acp_agent, acp_workspace, protocol):
    agent = acp_agent(turns=[[call("create_file", path="AGENTS.md", content="x")]],
                      protocol=protocol)
    sid = new_session(agent, acp_workspace)["sessionId"]
    set_option(agent, sid, "mode", "read-only")
    _, updates, end = agent.prompt(sid, "/init")
    assert "read-only mode" in texts(updates)
    assert stop_reason(protocol, end) == "end_turn"
    assert not os.path.exists(os.path.join(acp_workspace, "AGENTS.md"))
    agent.close()


@PROTOCOLS
def test_compact_compacts_now_and_ends_its_turn(acp_agent, acp_workspace, protocol):
    turns = [[{"text": f"answer {i} " + "x" * 200}] for i in range(6)]
    agent = acp_agent(turns=turns, protocol=protocol)
    sid = new_session(agent, acp_workspace)["sessionId"]
    _, updates, end = agent.prompt(sid, "/compact")
    assert texts(updates) == "Compacting failed because the conversation is empty."
    for number in range(6):
        agent.prompt(sid, f"question {number} " + "y" * 200)
    _, updates, end = agent.prompt(sid, "/compact")
    assert stop_reason(protocol, end) == "end_turn"
    # 6 prompts and answers, less the last two kept, and the first prompt's context note
    assert "Context compacted as asked: 11 earlier messages were summarized" in texts(updates)
    agent.close()


# ---------------------------------------------------------------- the plan
PLAN = {"explanation": "Two steps", "plan": [{"step": "read", "status": "completed"},
                                             {"step": "write", "status": "in_progress"}]}


@PROTOCOLS
def test_update_plan_sends_the_whole_plan_and_it_is_replayed(acp_agent, acp_workspace, protocol):
    agent = acp_agent(turns=[[call("update_plan", **PLAN)], [{"text": "planned"}]],
                      protocol=protocol)
    sid = new_session(agent, acp_workspace)["sessionId"]
    _, updates, _ = agent.prompt(sid, "plan it")
    entries = [{"content": "read", "status": "completed", "priority": "medium"},
               {"content": "write", "status": "in_progress", "priority": "medium"}]
    if protocol == 1:
        plans = [u for u in updates if u["sessionUpdate"] == "plan"]
        assert plans == [{"sessionUpdate": "plan", "entries": entries}]
    else:
        plans = [u for u in updates if u["sessionUpdate"] == "plan_update"]
        assert plans == [{"sessionUpdate": "plan_update", "plan": {
            "type": "items", "planId": f"plan-{sid}", "entries": entries}}]
    assert texts(updates, "agent_thought_chunk") == "Two steps"
    # the plan update shows it: no tool call (agent-shell draws one with a plan input as a
    # second copy of the plan)
    assert not [u for u in updates if u["sessionUpdate"].startswith("tool_call")]
    agent.close()
    again = acp_agent(turns=[], protocol=protocol)
    if protocol == 1:
        again.request("session/load", {"sessionId": sid, "cwd": acp_workspace, "mcpServers": []})
    else:
        again.request("session/resume", {"sessionId": sid, "cwd": acp_workspace,
                                         "replayFrom": {"type": "start"}})
    replayed = [m["params"]["update"] for m in again.messages
                if m.get("method") == "session/update"]
    assert [u for u in replayed if u["sessionUpdate"] in ("plan", "plan_update")] == plans
    assert not [u for u in replayed if u["sessionUpdate"].startswith("tool_call")]
    again.close()


def test_a_plan_with_two_steps_in_progress_is_refused(acp_agent, acp_workspace):
    bad = {"plan": [{"step": "a", "status": "in_progress"}, {"step": "b", "status": "in_progress"}]}
    agent = acp_agent(turns=[[call("update_plan", **bad)], [{"text": "ok"}]])
    sid = new_session(agent, acp_workspace)["sessionId"]
    _, updates, _ = agent.prompt(sid, "plan")
    assert finals(updates)[0]["status"] == "failed"
    assert not any(u["sessionUpdate"] == "plan_update" for u in updates)
    agent.close()


# ---------------------------------------------------------------- resume
@PROTOCOLS
def test_resume_restores_the_choices(acp_agent, acp_workspace, tmp_path, protocol):
    config = tmp_path / "config.toml"
    config.write_text('[providers.box]\ntype = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
                      'models = ["m1", "m2"]\nreasoning = true\n')
    env = {"TERM2ACP_CONFIG": str(config)}
    agent = acp_agent(args=["--provider", "box", "--model", "m1"], protocol=protocol, env=env)
    sid = new_session(agent, acp_workspace)["sessionId"]
    for config_id, value in (("model", "m2"), ("effort", "high"), ("mode", "read-only")):
        assert "result" in set_option(agent, sid, config_id, value)
    agent.close()
    again = acp_agent(args=["--provider", "box", "--model", "m1"], protocol=protocol, env=env)
    answer = again.request("session/resume", {"sessionId": sid, "cwd": acp_workspace,
                                              "mcpServers": []})
    options = options_by_id(answer["result"]["configOptions"], protocol)
    assert {k: o["currentValue"] for k, o in options.items()} == {
        "model": "m2", "effort": "high", "mode": "read-only"}
    if protocol == 1:
        assert answer["result"]["modes"]["currentModeId"] == "read-only"
    assert any(is_response(m, answer["id"]) for m in again.messages)
    again.close()


@PROTOCOLS
def test_bad_choices_are_invalid_params(acp_agent, acp_workspace, protocol):
    agent = acp_agent(turns=[[{"text": "hi"}]], protocol=protocol)
    sid = new_session(agent, acp_workspace)["sessionId"]
    for config_id, value in (("mode", "yolo"), ("nope", "x"), ("mode", True)):
        error = set_option(agent, sid, config_id, value)["error"]
        assert error["code"] == -32602, error
    assert set_option(agent, "no-such-session", "mode", "ask")["error"]["code"] == -32002
    agent.close()


# ---------------------------------------------------------------- plug-in commands
PLUGIN = '''
from term2acp.turns.commands import ModelPrompt, function_command


@function_command(name="hello", description="Greet someone", hint="name")
def hello(argument, ctx):
    return f"Hello {argument or 'world'} from {ctx.root}"


@function_command(name="ask-model", description="Hand the model a prompt")
def ask_model(argument, ctx):
    return ModelPrompt("Say the magic word.")


@function_command(name="init", description="Tries to take a built-in name")
def taken(argument, ctx):
    return "never"
'''


@pytest.fixture
def command_plugins(tmp_path):
    site = tmp_path / "cmd-site"
    info = site / "t2a_cmds-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "t2a_cmds.py").write_text(PLUGIN)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: t2a-cmds\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[term2acp.commands]\nhello = t2a_cmds:hello\nask = t2a_cmds:ask_model\n"
        "broken = t2a_cmds:missing\ntaken = t2a_cmds:taken\n")
    return {"PYTHONPATH": str(site)}


@PROTOCOLS
def test_plugin_commands_from_the_entry_point_group(acp_agent, acp_workspace, command_plugins,
                                                     protocol):
    agent = acp_agent(turns=[[{"text": "not played"}], [{"text": "xyzzy"}]], protocol=protocol,
                      env=command_plugins)
    sid = new_session(agent, acp_workspace)["sessionId"]
    listed = seen_or_next(agent, sid, "available_commands_update")["availableCommands"]
    names = [c["name"] for c in listed]
    assert names == ["compact", "init", "model", "mode", "undo", "rename", "rewind", "ask-model",
                     "hello"]  # broken, taken: skipped
    assert [c["description"] for c in listed if c["name"] == "init"] == [
        "Ask the agent to write or update AGENTS.md for this project"]
    _, updates, end = agent.prompt(sid, "/hello Ada")
    assert texts(updates) == f"Hello Ada from {acp_workspace}"
    assert stop_reason(protocol, end) == "end_turn"
    _, updates, _ = agent.prompt(sid, "/ask-model")
    assert texts(updates) == "xyzzy"
    agent.close()
