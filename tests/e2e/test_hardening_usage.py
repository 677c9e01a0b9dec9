"""What a provider says it used is checked, through the launcher on v1 and v2: a NaN,
negative, fractional or text token count is dropped with a warning on stderr, so the turn
ends, the client's usage holds only non-negative integers and the next prompt works."""

import json
import math

import pytest

from tests.support import fake_llm as f


@pytest.fixture
def model():
    srv = f.FakeLLMServer()
    srv.start()
    yield srv
    srv.stop()


def numbers(value):
    """Every number in a JSON value, costs left out."""
    if isinstance(value, dict):  # a cost is an amount, not a count
        return [n for k, v in value.items() if k != "cost" for n in numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in numbers(v)]
    return [value] if isinstance(value, (int, float)) and not isinstance(value, bool) else []


@pytest.mark.acp_process
@pytest.mark.parametrize("protocol", [1, 2])
def test_bad_usage_numbers_are_dropped_and_the_session_goes_on(acp_agent, acp_workspace, model,
                                                               protocol):
    bad = {"prompt_tokens": math.nan, "completion_tokens": -7, "total_tokens": "lots",
           "completion_tokens_details": {"reasoning_tokens": 2.5},
           "prompt_tokens_details": {"cached_tokens": -1e300}}
    model.enqueue(
        f.openai_sse(f.oa_text("first"), f.oa_finish("stop"), f.oa_chunk(choices=False,
                                                                         usage=bad)),
        f.openai_sse(f.oa_text("second"), f.oa_finish("stop"), f.oa_usage(12, 3)))
    agent = acp_agent(args=["--provider", "openai", "--model", "gpt-4.1-mini"],
                      env={"OPENAI_BASE_URL": model.openai_url, "OPENAI_API_KEY": "x"},
                      protocol=protocol)
    sid = agent.request("session/new", {"cwd": acp_workspace, "mcpServers": []})["result"][
        "sessionId"]
    for words in ("one", "two"):
        start = len(agent.messages)
        response, _updates, end = agent.prompt(sid, words, timeout=30)
        stop = end["result"] if protocol == 1 else end["params"]["update"]
        assert stop["stopReason"] == "end_turn", end
        seen = json.dumps(agent.messages[start:])
        assert "NaN" not in seen and "Infinity" not in seen
        usage = [m["params"]["update"] for m in agent.messages[start:]
                 if m.get("method") == "session/update"
                 and m["params"]["update"]["sessionUpdate"] == "usage_update"]
        counted = numbers(usage) + numbers(response["result"].get("usage"))
        assert counted and all(n >= 0 and n == int(n) for n in counted), counted
    assert agent.wait_stderr("input_tokens nan, not a count")
    assert agent.wait_stderr("output_tokens -7, not a count")
    assert agent.close() == 0
