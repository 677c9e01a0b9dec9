"""providers/scripted.py: a sequential script (a recorded session's replies) gives each
sub-agent its own turns, in order, whatever order their requests come in."""

import json

import pytest

from term2acp.providers.base import ModelRequest, ProviderError, TextDelta
from term2acp.providers.scripted import ScriptedProvider


def provider(tmp_path, script):
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    return ScriptedProvider(str(path))


def said(provider, agent=None):
    request = ModelRequest(model="m", system="", messages=[], agent=agent)
    return "".join(e.text for e in provider.stream(request) if isinstance(e, TextDelta))


def test_each_requester_plays_its_own_turns_in_order(tmp_path):
    scripted = provider(tmp_path, {
        "sequential": True,
        "turns": [[{"text": "P1"}], [{"text": "A1"}], [{"text": "B1"}], [{"text": "A2"}],
                  [{"text": "B2"}], [{"text": "P2"}]],
        "agents": [None, "call_a", "call_b", "call_a", "call_b", None]})
    assert said(scripted) == "P1"
    assert said(scripted, "call_b") == "B1"  # B asks first this time
    assert said(scripted, "call_a") == "A1"
    assert said(scripted, "call_b") == "B2"
    assert said(scripted, "call_a") == "A2"
    assert said(scripted) == "P2"
    with pytest.raises(ProviderError, match="no turn 7"):
        said(scripted, "call_a")


def test_without_agents_the_turns_go_in_the_order_asked(tmp_path):
    scripted = provider(tmp_path, {"sequential": True,
                                   "turns": [[{"text": "one"}], [{"text": "two"}]]})
    assert said(scripted, "call_b") == "one"
    assert said(scripted) == "two"
