"""Plan mode through the launcher against the fake model server, v1 and v2: writes and
commands refused, finish_plan offers the three choices through session/request_permission,
"start, auto" switches the mode (reported) and the work runs in the same turn; "keep
planning" ends the turn."""

import json
import os

import pytest

from tests.e2e.test_undo import calls, srv, text  # noqa: F401 - srv is a fixture

CHOICES = [("plan-start-auto", "Start, auto", "allow_always"),
           ("plan-start-ask", "Start, ask for every change", "allow_once"),
           ("plan-keep", "Keep planning", "reject_once")]


def plan_session(acp_agent, server, workspace, protocol, mode="plan"):
    agent = acp_agent(args=("--provider", "openai", "--model", "m"), protocol=protocol,
                      env={"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "sk-t-123456"})
    sid = agent.new_session(workspace)
    if protocol == 1:
        answer = agent.request("session/set_mode", {"sessionId": sid, "modeId": mode})
    else:
        answer = agent.request("session/set_config_option",
                               {"sessionId": sid, "configId": "mode", "value": mode})
    assert "result" in answer, answer
    return agent, sid


def answering(option_id, asked):
    def on_request(message):
        if message["method"] != "session/request_permission":
            return None  # v1 fs/*: the harness serves them from the disk
        asked.append(message)
        return {"outcome": {"outcome": "selected", "optionId": option_id}}
    return on_request


def tool_names(request):
    return {t["function"]["name"] for t in request.json["tools"]}


def results(request):
    return [m["content"] for m in request.json["messages"] if m["role"] == "tool"]


@pytest.mark.parametrize("protocol", [2, 1])
def test_plan_mode_refuses_changes_then_start_auto_runs_the_work(acp_agent, acp_workspace, srv,
                                                                 protocol):
    srv.enqueue(calls(("create_file", {"path": "early.txt", "content": "no\n"}),
                      ("shell", {"command": "echo no > ran.txt"})),
                calls(("finish_plan", {"summary": "1. create plan.txt"})),
                calls(("create_file", {"path": "plan.txt", "content": "done\n"})),
                text("Planned and done."))
    agent, sid = plan_session(acp_agent, srv, acp_workspace, protocol)
    asked = []
    _, updates, _ = agent.prompt(sid, "make plan.txt", timeout=30,
                                 on_request=answering("plan-start-auto", asked))
    first, second, third, fourth = srv.requests[-4:]
    assert "finish_plan" in tool_names(first)
    assert len(results(second)) == 2 and all("plan mode" in r for r in results(second)), \
        results(second)  # both refused
    assert not os.path.exists(f"{acp_workspace}/early.txt")
    assert not os.path.exists(f"{acp_workspace}/ran.txt")
    assert len(asked) == 1 and asked[0]["method"] == "session/request_permission"
    offered = [(o["optionId"], o["name"], o["kind"]) for o in asked[0]["params"]["options"]]
    assert offered == CHOICES
    assert "create plan.txt" in json.dumps(asked[0]["params"])
    assert "finish_plan" not in tool_names(third)  # auto now: the work goes on, same turn
    assert "auto mode" in results(third)[-1]
    with open(f"{acp_workspace}/plan.txt") as fh:
        assert fh.read() == "done\n"
    modes = [u for u in updates if u["sessionUpdate"] == "config_option_update"]
    assert modes and [o for o in modes[-1]["configOptions"]
                      if o.get("configId", o.get("id")) == "mode"][0]["currentValue"] == "auto"
    if protocol == 1:
        assert {"sessionUpdate": "current_mode_update", "currentModeId": "auto"} in updates


@pytest.mark.parametrize("protocol", [2, 1])
def test_keep_planning_ends_the_turn_in_plan_mode(acp_agent, acp_workspace, srv, protocol):
    srv.enqueue(calls(("finish_plan", {"summary": "a plan"})), text("not reached"))
    agent, sid = plan_session(acp_agent, srv, acp_workspace, protocol)
    asked = []
    _, updates, end = agent.prompt(sid, "plan it", timeout=30,
                                   on_request=answering("plan-keep", asked))
    assert len(asked) == 1
    stop = end["result"]["stopReason"] if protocol == 1 else end["params"]["update"]["stopReason"]
    assert stop == "end_turn"
    assert len(srv.requests) == 1  # no model request after "keep planning"
    assert not any(u["sessionUpdate"] in ("config_option_update", "current_mode_update")
                   for u in updates)
