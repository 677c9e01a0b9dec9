"""Paying for each token once (issue 27), through the launcher on v1 and v2, against the
recording fake server: prompt caching and a stable prefix over a whole session (tool
calls, a mode switch, /compact, a restart), prompt_cache_key, the Responses API's
reasoning, any model id, the models endpoint in the picker, and the cost in usage_update.
"""

import json

import pytest

from tests.support import fake_llm as f
from tests.support import fake_responses as fr
from tests.support import scenario

PROTOCOLS = pytest.mark.parametrize("protocol", [1, 2])


@pytest.fixture
def server():
    srv = f.FakeLLMServer().start()
    yield srv
    srv.stop()


def play(acp_env, workspace, server, provider, args, protocol, config=""):
    model = scenario.ScenarioModel("openai" if provider == "openai" else "anthropic")
    server.responder = model
    scenario.write_workspace(workspace)
    if config:
        with open(acp_env["TERM2ACP_CONFIG"], "w") as fh:
            fh.write(config)
    env = dict(acp_env, **scenario.provider_env(provider, server))
    model.restart_at = None

    def restarting():
        model.restart_at = len(model.ledger.rows)
    stops, first, second = scenario.run_session(env, workspace, ["--provider", provider, *args],
                                                protocol=protocol, restarting=restarting)
    assert stops == ["end_turn"] * 6
    assert not first.schema_errors and not second.schema_errors
    assert model.refused == []  # the server accepted every request as it came
    play.restart_at = model.restart_at
    return model.ledger.rows, first, second


def updates(agent, kind):
    return [m["params"]["update"] for m in agent.messages if m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == kind]


@PROTOCOLS
def test_anthropic_session_costs_what_an_ideal_prefix_cache_costs(acp_env, acp_workspace,
                                                                   server, protocol):
    rows, first, second = play(acp_env, acp_workspace, server, "anthropic",
                               ["--model", "claude-sonnet-4-5", "--effort", "low"], protocol)
    cost, ideal = sum(r.cost for r in rows), sum(r.ideal for r in rows)
    assert cost <= 1.15 * ideal, [(r.number, r.cost, r.ideal) for r in rows]
    turns = [r for r in rows if r.kind == "turn"]
    # every turn request after the first reads what the one before it wrote
    assert all(r.read > 0 for r in turns[1:])
    # the prefix survives the mode switch (request 7: the first of prompt 3) and the
    # restart (the first request of the second process) byte for byte
    after_switch, after_restart = rows[6], rows[play.restart_at]
    shared = [(r.number, r.kind, r.shared) for r in rows]
    assert after_switch.shared >= 0.95 and after_restart.shared >= 0.95, shared
    # the usage meter shows money: cumulative, in USD, growing
    costs = [u["cost"]["amount"] for u in updates(first, "usage_update") if u.get("cost")]
    assert costs and all(b >= a for a, b in zip(costs, costs[1:])) and costs[-1] > 0
    assert {u["cost"]["currency"] for u in updates(first, "usage_update")} == {"USD"}
    # a restarted session's meter goes on from what the session cost before
    later = [u["cost"]["amount"] for u in updates(second, "usage_update") if u.get("cost")]
    assert later and later[0] > costs[-1]


@PROTOCOLS
def test_openai_chat_requests_carry_the_session_id_as_prompt_cache_key(
        acp_env, acp_workspace, server, protocol):
    config = '[providers.openai]\napi = "chat"\nprompt_cache_key = true\n'
    rows, first, _ = play(acp_env, acp_workspace, server, "openai", ["--model", "gpt-4.1-mini"],
                          protocol, config)
    sid = next(m["result"]["sessionId"] for m in first.messages
               if isinstance(m.get("result"), dict) and "sessionId" in m["result"])
    assert {r.cache_key for r in rows} == {sid}
    assert all(r.kind == "summary" or r.model == "gpt-4.1-mini" for r in rows)
    assert sum(r.cost for r in rows) <= 1.15 * sum(r.ideal for r in rows)


@PROTOCOLS
def test_responses_api_shows_reasoning_and_carries_it_between_tool_calls(
        acp_env, acp_workspace, server, protocol):
    # the fake refuses a request whose encrypted reasoning did not come back in front
    # of the calls it preceded (after the restart too)
    config = '[providers.openai]\napi = "responses"\n'
    server.responses = True
    rows, first, second = play(acp_env, acp_workspace, server, "openai",
                               ["--model", "gpt-5.2", "--effort", "low"], protocol, config)
    bodies = [json.loads(r.body) for r in server.requests]
    assert all(r.path == "/v1/responses" for r in server.requests)
    turn = bodies[1]
    assert turn["store"] is False and turn["include"] == ["reasoning.encrypted_content"]
    assert turn["reasoning"] == {"effort": "low", "summary": "auto"}
    carried = [i for i in turn["input"] if i.get("type") == "reasoning"]
    assert carried and carried[0]["encrypted_content"].startswith("enc-")
    thoughts = "".join(u["content"]["text"] for u in updates(first, "agent_thought_chunk"))
    assert "Thinking about request 1." in thoughts
    assert sum(r.cost for r in rows) <= 1.15 * sum(r.ideal for r in rows)


@PROTOCOLS
def test_responses_api_errors_end_the_turn_with_the_servers_message(
        acp_env, acp_agent, acp_workspace, server, protocol):
    server.enqueue(fr.error_event("The model `gpt-nope` does not exist.", "model_not_found"))
    server.responses = True
    with open(acp_env["TERM2ACP_CONFIG"], "w") as fh:
        fh.write('[providers.openai]\napi = "responses"\n')
    agent = acp_agent(args=["--provider", "openai", "--model", "gpt-nope"], protocol=protocol,
                      env={"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "sk-abc"})
    sid = agent.request("session/new", {"cwd": acp_workspace,
                                        "mcpServers": []})["result"]["sessionId"]
    _, seen, end = agent.prompt(sid, "hi", timeout=30)
    text = "".join(u["content"]["text"] for u in seen if u["sessionUpdate"] == "agent_message_chunk")
    if protocol == 1:  # said once, as the prompt's error
        text = end["error"]["message"]
    assert "does not exist" in text
    assert server.requests[0].path == "/v1/responses"
    agent.close()


@PROTOCOLS
def test_a_model_outside_the_catalog_starts_and_is_named_in_requests(
        acp_agent, acp_workspace, server, protocol):
    server.enqueue(f.anthropic_sse(f.an_start(), f.an_text(0, "hi"), f.an_end()),
                   f.Status(404, {"type": "error", "error": {
                       "type": "not_found_error", "message": "model: claude-sonnet-9"}}))
    server.models = ["claude-sonnet-9", "claude-listed-7"]
    agent = acp_agent(args=["--model", "claude-sonnet-9"], protocol=protocol,
                      env={"ANTHROPIC_BASE_URL": server.root_url, "ANTHROPIC_API_KEY": "sk-ant-x"})
    params = {"cwd": acp_workspace, "mcpServers": []}
    sid = agent.request("session/new", params)["result"]["sessionId"]
    agent.prompt(sid, "hi", timeout=30)
    assert server.wait_requests(1)[0].json["model"] == "claude-sonnet-9"
    # the models endpoint's ids join the picker (fetched in the background)
    def listed(message):
        update = message.get("params", {}).get("update", {}) \
            if message.get("method") == "session/update" else {}
        if update.get("sessionUpdate") != "config_option_update":
            return False
        model = next(o for o in update["configOptions"]
                     if o.get("id", o.get("configId")) == "model")
        return "claude-listed-7" in {v["value"] for v in model["options"]}
    if not any(listed(m) for m in agent.messages):
        agent.wait_for(listed, timeout=10)
    assert server.listings[0].headers.get("anthropic-version")
    # an id the provider rejects fails the turn with the provider's message
    response, seen, _ = agent.prompt(sid, "again", timeout=30)
    text = "".join(u["content"]["text"] for u in seen if u["sessionUpdate"] == "agent_message_chunk")
    if "error" in response:  # v1: said once, as the prompt's error
        text = response["error"]["message"]
    assert "model: claude-sonnet-9" in text
    agent.close()
