"""headless/render.in_call_order: the order a recording and its replay compare tool calls
in, whatever order sub-agents side by side ran theirs."""

from term2acp.headless.render import in_call_order


def test_each_call_is_followed_by_its_sub_agents_calls_in_their_own_order():
    ran = [("a", None, "agent A"), ("b", None, "agent B"), ("b1", "b", "B reads"),
           ("a1", "a", "A reads"), ("b2", "b", "B greps"), ("x", None, "the parent's last"),
           ("a2", "a", "A answers")]
    replayed = [("a", None, "agent A"), ("b", None, "agent B"), ("a1", "a", "A reads"),
                ("a2", "a", "A answers"), ("b1", "b", "B reads"), ("b2", "b", "B greps"),
                ("x", None, "the parent's last")]
    expected = ["agent A", "A reads", "A answers", "agent B", "B reads", "B greps",
                "the parent's last"]
    assert in_call_order(ran) == in_call_order(replayed) == expected


def test_calls_without_sub_agents_keep_their_order():
    assert in_call_order([("1", None, 1), ("2", None, 2), ("3", "gone", 3)]) == [1, 2, 3]
