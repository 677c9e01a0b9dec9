"""apply_patch and the forgiving edit_file through the launcher, a fake model server making
the calls, ACP v1 (writes through the editor's fs) and v2."""

import json
import os

import pytest

from term2acp.testing.harness import selected
from tests.support.toolcalls import (call_text, finished_calls, model_server, start_agent,
                                     tool_results)

APP = "def greet():\n    print('hi')\n    return 1\n"


def patch(*lines):
    return "\n".join(("*** Begin Patch",) + lines + ("*** End Patch",)) + "\n"


def diffs(update, protocol):
    """``(path, operation)`` of each diff of a finished call, as the editor sees them."""
    out = []
    for item in update.get("content") or ():
        if item.get("type") != "diff":
            continue
        if protocol == 2:
            change = item["changes"][0]
            out.append((change["path"], change["operation"]))
        else:
            out.append((item["path"], "delete" if item["newText"] == "" else "write"))
    return out


@pytest.fixture
def outside(tmp_path):
    path = tmp_path / "outside"
    path.mkdir()
    (path / "o.txt").write_text("old outside\n")
    return os.path.realpath(path)


@pytest.mark.parametrize("protocol", [1, 2])
def test_apply_patch_adds_updates_deletes_and_moves_and_asks_outside(acp_agent, workspace,
                                                                    outside, protocol):
    with open(os.path.join(workspace, "app.py"), "w") as fh:
        fh.write(APP)
    for name, text in (("old.txt", "bye\n"), ("mod.py", "x = 1\n"), ("keep.txt", "keep\n")):
        with open(os.path.join(workspace, name), "w") as fh:
            fh.write(text)
    good = patch("*** Add File: docs/new.md", "+# New",
                 "*** Update File: app.py", "@@ def greet():", "-    print('hi')",
                 "+    print('hello')",
                 "*** Delete File: old.txt",
                 "*** Update File: mod.py", "*** Move to: pkg/mod.py", "-x = 1", "+x = 2")
    bad = patch("*** Delete File: keep.txt",
                "*** Update File: app.py", "@@", " def greet():", "-    print('nope')",
                "+    print('x')")
    out = patch(f"*** Update File: {outside}/o.txt", "-old outside", "+new outside")
    server = model_server([[("apply_patch", {"input": good})], [("apply_patch", {"input": bad})],
                           [("apply_patch", {"input": out})]])
    try:
        agent = start_agent(acp_agent, server, protocol)
        sid = agent.new_session(workspace)
        asked = []
        _, updates, _ = agent.prompt(sid, "patch it", timeout=30, on_request=lambda m: (
            asked.append(m) or selected("reject")) if m["method"] ==
            "session/request_permission" else None)
        calls = finished_calls(updates)
        first, second, third = calls
        assert first["status"] == "completed"
        w = workspace
        expected = {2: [(f"{w}/docs/new.md", "add"), (f"{w}/app.py", "modify"),
                        (f"{w}/old.txt", "delete"), (f"{w}/pkg/mod.py", "move")],
                    1: [(f"{w}/docs/new.md", "write"), (f"{w}/app.py", "write"),
                        (f"{w}/old.txt", "delete"), (f"{w}/pkg/mod.py", "write")]}[protocol]
        assert diffs(first, protocol) == expected
        assert open(os.path.join(w, "docs/new.md")).read() == "# New\n"
        assert open(os.path.join(w, "app.py")).read() == APP.replace("'hi'", "'hello'")
        assert open(os.path.join(w, "pkg/mod.py")).read() == "x = 2\n"
        assert not os.path.exists(os.path.join(w, "old.txt"))
        assert not os.path.exists(os.path.join(w, "mod.py"))
        # the hunk that does not apply: nothing changed, the hunk named
        assert second["status"] == "failed"
        assert "app.py, hunk 1" in call_text(second) and "Nothing was changed" in call_text(second)
        assert os.path.exists(os.path.join(w, "keep.txt"))
        # an outside path asks; the rejection writes nothing
        assert len(asked) == 1 and f"{outside}/o.txt" in json.dumps(asked[0]["params"])
        assert third["status"] == "failed"
        assert open(os.path.join(outside, "o.txt")).read() == "old outside\n"
        results = tool_results(server)
        assert "Applied the patch (4 files)" in results["call_0"]
        if protocol == 1:  # v1 writes inside the root through the editor
            written = [m["params"]["path"] for m in agent.fs_requests
                       if m["method"] == "fs/write_text_file"]
            assert f"{w}/app.py" in written and f"{w}/docs/new.md" in written
        assert agent.close() == 0
    finally:
        server.stop()


@pytest.mark.parametrize("protocol", [1, 2])
def test_edit_file_forgives_shifted_indentation_and_shows_ambiguous_candidates(
        acp_agent, workspace, protocol):
    with open(os.path.join(workspace, "a.py"), "w") as fh:
        fh.write("class A:\n    def f(self):\n        return 1\n")
    with open(os.path.join(workspace, "b.py"), "w") as fh:
        fh.write("if a:\n    go()\nif b:\n  go()\n")
    shifted = {"path": "a.py", "edits": [{"old_text": "def f(self):\n    return 1",
                                          "new_text": "def f(self):\n    return 2"}]}
    ambiguous = {"path": "b.py", "edits": [{"old_text": "      go()", "new_text": "stop()"}]}
    server = model_server([[("edit_file", shifted), ("edit_file", ambiguous)]])
    try:
        agent = start_agent(acp_agent, server, protocol)
        sid = agent.new_session(workspace)
        _, updates, _ = agent.prompt(sid, "edit", timeout=30)
        calls = finished_calls(updates)
        assert [c["status"] for c in calls] == ["completed", "failed"]
        assert open(os.path.join(workspace, "a.py")).read() == \
            "class A:\n    def f(self):\n        return 2\n"
        results = tool_results(server)
        assert "only after normalising whitespace" in results["call_0"]
        failure = results["call_1"]
        assert "2 places in b.py once whitespace is normalised" in failure
        assert "line 2:\n        go()" in failure and "line 4:\n      go()" in failure
        assert open(os.path.join(workspace, "b.py")).read() == "if a:\n    go()\nif b:\n  go()\n"
        assert agent.close() == 0
    finally:
        server.stop()


@pytest.mark.parametrize("protocol", [1, 2])
def test_apply_patch_refuses_a_hunk_that_matches_two_places(acp_agent, workspace, protocol):
    """A hunk without an ``@@`` line whose lines occur twice is refused with both places'
    lines, nothing written; with an ``@@`` line naming the place it applies there."""
    text = "def a():\n    x = 1\n    return x\n\ndef b():\n    x = 1\n    return x\n"
    with open(os.path.join(workspace, "two.py"), "w") as fh:
        fh.write(text)
    ambiguous = patch("*** Update File: two.py", "@@", "-    x = 1", "+    x = 2",
                      "     return x")
    placed = patch("*** Update File: two.py", "@@ def b():", "-    x = 1", "+    x = 2")
    server = model_server([[("apply_patch", {"input": ambiguous})],
                           [("apply_patch", {"input": placed})]])
    try:
        agent = start_agent(acp_agent, server, protocol)
        sid = agent.new_session(workspace)
        _, updates, _ = agent.prompt(sid, "patch it", timeout=30)
        first, second = finished_calls(updates)
        assert first["status"] == "failed"
        told = tool_results(server)["call_0"]
        assert "match 2 places (lines 2-3, 6-7)" in told and "Nothing was changed" in told
        assert second["status"] == "completed"
        with open(os.path.join(workspace, "two.py")) as fh:
            assert fh.read() == text.replace("def b():\n    x = 1", "def b():\n    x = 2")
        assert agent.close() == 0
    finally:
        server.stop()
