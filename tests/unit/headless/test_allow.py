"""exec's --allow patterns: what each tool's glob matches, and that anything else refuses."""

import pytest

from term2acp.headless import allow

OPTIONS = [{"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
           {"optionId": "always", "name": "Always", "kind": "allow_always"},
           {"optionId": "reject", "name": "Reject", "kind": "reject_once"}]


def question(tool, raw, locations=()):
    return {"title": "?", "description": f"{tool} {{}}", "options": OPTIONS,
            "subject": {"type": "tool_call", "toolCall": {
                "toolCallId": "tc_1", "rawInput": raw,
                "locations": [{"path": p} for p in locations]}}}


@pytest.mark.parametrize("patterns, tool, raw, locations, allowed", [
    (["edit_file:src/*"], "edit_file", {"path": "src/a.py"}, ["/w/src/a.py"], True),
    (["edit_file:src/*"], "edit_file", {"path": "lib/a.py"}, ["/w/lib/a.py"], False),
    (["edit_file:*.txt"], "apply_patch", {}, ["/w/a.txt"], False),  # another tool
    (["apply_patch:*.py"], "apply_patch", {}, ["/w/a.py", "/w/b.txt"], False),  # every path
    (["apply_patch:*.py"], "apply_patch", {}, ["/w/a.py", "/w/x/b.py"], True),
    (["create_file"], "create_file", {"path": "anything"}, [], True),
    (["shell:pytest*"], "shell", {"command": "pytest -q tests"}, [], True),
    (["shell:pytest*"], "shell", {"command": "rm -rf / ; pytest"}, [], False),
    (["web_fetch:*.python.org"], "web_fetch", {"url": "https://docs.python.org/3/"}, [], True),
    (["web_fetch:*.python.org"], "web_fetch", {"url": "https://evil.example/?docs.python.org"},
     [], False),
    ([], "read_file", {"path": "/etc/passwd"}, ["/etc/passwd"], False),
])
def test_allow_patterns_match_per_tool_and_refuse_otherwise(patterns, tool, raw, locations,
                                                            allowed):
    option, rule = allow.decide(allow.parse(patterns), question(tool, raw, locations), "/w")
    assert (option["kind"], rule is not None) == (
        ("allow_once", True) if allowed else ("reject_once", False))


def test_allow_never_grants_more_than_once():
    params = question("shell", {"command": "ls"})
    params["options"] = [o for o in OPTIONS if o["kind"] != "allow_once"]
    option, rule = allow.decide(allow.parse(["shell"]), params, "/w")
    assert option["kind"] == "reject_once" and rule is None


@pytest.mark.parametrize("bad", ["", ":x", "shell:"])
def test_allow_bad_patterns_are_usage_errors(bad):
    with pytest.raises(allow.PatternError):
        allow.parse([bad])
