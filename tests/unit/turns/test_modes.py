"""turns/modes.py: each mode's rule for one call (issue 15)."""

import pytest

from term2acp.turns import modes
from term2acp.core.approvals import OUTSIDE_EDIT, ApprovalRequest


class FakeTool:
    def __init__(self, kind, name="t"):
        self.kind, self.name = kind, name


@pytest.mark.parametrize("kind", ["read", "search", "think", "fetch"])
@pytest.mark.parametrize("mode", [m for m in modes.MODE_IDS if m != modes.PLAN])
def test_reads_follow_the_tools_own_policy_in_every_mode(kind, mode):
    asked = ApprovalRequest(title="read outside")
    assert modes.check(mode, FakeTool(kind), "x", None) == (None, None)
    assert modes.check(mode, FakeTool(kind), "x", asked) == (None, asked)


@pytest.mark.parametrize("kind", ["edit", "delete", "move", "execute", "other"])
def test_read_only_refuses_anything_that_could_change_things(kind):
    refusal, request = modes.check(modes.READ_ONLY, FakeTool(kind, "create_file"), "x", None)
    assert request is None and "read-only mode" in refusal and "create_file" in refusal


@pytest.mark.parametrize("kind", ["edit", "delete", "move", "execute", "other"])
def test_plan_refuses_anything_that_could_change_things(kind):
    refusal, request = modes.check(modes.PLAN, FakeTool(kind, "shell"), "x", None)
    assert request is None and "plan mode" in refusal and "finish_plan" in refusal


@pytest.mark.parametrize("kind", ["read", "search", "think"])
def test_plan_reads_follow_the_tools_own_policy_and_every_fetch_asks(kind):
    asked = ApprovalRequest(title="read outside")
    assert modes.check(modes.PLAN, FakeTool(kind), "x", asked) == (None, asked)
    assert modes.check(modes.PLAN, FakeTool(kind), "x", None) == (None, None)
    _, request = modes.check(modes.PLAN, FakeTool("fetch"), "Fetch a page", None)
    assert request.variant == "ordinary" and request.title == "Fetch a page"


def test_a_tool_with_modes_is_offered_only_in_them():
    tool = FakeTool("think")
    assert modes.offered(modes.AUTO, tool)
    tool.modes = frozenset({modes.PLAN})
    assert modes.offered(modes.PLAN, tool) and not modes.offered(modes.AUTO, tool)
    from term2acp.turns import notes  # the model is told the mode in a context note

    assert "PLAN mode" in notes.MODE_TEXT[modes.PLAN]


def test_ask_asks_a_plain_question_whatever_the_tools_policy():
    _, request = modes.check(modes.ASK, FakeTool("edit"), "Create a.txt", None)
    assert request.variant == "ordinary" and request.title == "Create a.txt"
    assert request.path is None  # nothing to remember as a grant
    outside = ApprovalRequest(variant=OUTSIDE_EDIT, path="/o/a", title="Edit /o/a",
                              content=[{"type": "text", "text": "diff"}])
    _, request = modes.check(modes.ASK, FakeTool("edit"), "x", outside)
    assert (request.variant, request.path, request.title, request.content) == (
        "ordinary", None, "Edit /o/a", [{"type": "text", "text": "diff"}])


def test_auto_is_todays_policy():
    asked = ApprovalRequest(variant=OUTSIDE_EDIT, path="/o/a")
    assert modes.check(modes.AUTO, FakeTool("edit"), "x", None) == (None, None)
    assert modes.check(modes.AUTO, FakeTool("edit"), "x", asked) == (None, asked)
