"""A fake OpenAI-compatible model that makes the tool calls a test lists, over real HTTP.

``model_server(rounds)`` starts a :class:`~tests.support.fake_llm.FakeLLMServer` whose
each chat request is answered with the next round: a list of ``(tool name, arguments)``
calls in one assistant message; once the rounds are used up it answers ``done``. The
agent runs with ``--provider openai`` against it (:func:`agent_env`), so every call goes
through the launcher, the provider's HTTP client, the turn and the real tools.
"""

import json

from tests.support import fake_llm as f


def round_reply(calls, first_id):
    chunks = [f.oa_tool(index, f"call_{first_id + index}", name, json.dumps(args))
              for index, (name, args) in enumerate(calls)]
    return f.openai_sse(*chunks, f.oa_finish("tool_calls"))


def model_server(rounds):
    server = f.FakeLLMServer()
    state = {"next": 0, "ids": 0}

    def respond(_request):
        if state["next"] >= len(rounds):
            return f.openai_sse(f.oa_text("done"), f.oa_finish("stop"))
        calls = rounds[state["next"]]
        state["next"] += 1
        state["ids"] += len(calls)
        return round_reply(calls, state["ids"] - len(calls))
    server.responder = respond
    return server.start()


def agent_env(server):
    return {"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "sk-test-123456"}


def start_agent(acp_agent, server, protocol, env=None, args=()):
    return acp_agent(args=("--provider", "openai", "--model", "m", *args), protocol=protocol,
                     env={**agent_env(server), **(env or {})})


def finished_calls(updates):
    """The final update (terminal status) of each tool call, in the order the calls were
    first reported."""
    order, final = [], {}
    for update in updates:
        if update.get("sessionUpdate") not in ("tool_call", "tool_call_update"):
            continue
        if update["toolCallId"] not in order:
            order.append(update["toolCallId"])
        if update.get("status") in ("completed", "failed"):
            final[update["toolCallId"]] = update
    return [final[call] for call in order if call in final]


def call_text(update):
    """The text content of a finished call (v1 and v2 shapes)."""
    out = []
    for item in update.get("content") or ():
        if item.get("type") == "content":
            out.append(item["content"].get("text", ""))
    return "".join(out)


def tool_results(server):
    """The tool results the model was sent, by call id (from the last request)."""
    body = server.requests[-1].json
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}
