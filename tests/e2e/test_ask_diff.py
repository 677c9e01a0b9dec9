"""Ask mode shows what a file change would do: the session/request_permission of edit_file,
create_file over an existing file and a two-file apply_patch carries in toolCall.content
the diff items the completed call reports (v2 ``diff`` with the git patch, v1 ``{type:
"diff", path, oldText, newText}``), one per file; through the launcher against the fake
model server, v1 and v2."""

import os

import pytest

from term2acp.testing.harness import selected
from tests.e2e.test_plan_mode import plan_session
from tests.e2e.test_undo import calls, edit, read, srv, text, write  # noqa: F401 - srv

PATCH = """*** Begin Patch
*** Update File: b.txt
@@
-bee
+BEE
*** Update File: c.txt
@@
-sea
+SEA
*** End Patch"""


def ask_session(acp_agent, server, workspace, protocol):
    return plan_session(acp_agent, server, workspace, protocol, mode="ask")


def asked_contents(asked, protocol):
    out = []
    for message in asked:
        params = message["params"]
        tool_call = params["toolCall"] if protocol == 1 else params["subject"]["toolCall"]
        out.append(tool_call.get("content") or [])
    return out


@pytest.mark.acp_process
@pytest.mark.parametrize("protocol", [2, 1])
def test_ask_mode_permissions_carry_each_files_diff(acp_agent, acp_workspace, srv, protocol):
    for name, body in (("a.txt", "alpha\n"), ("n.txt", "old note\n"), ("b.txt", "bee\n"),
                       ("c.txt", "sea\n")):
        write(os.path.join(acp_workspace, name), body)
    srv.enqueue(calls(edit("a.txt", "alpha", "ALPHA")),
                calls(("create_file", {"path": "n.txt", "content": "new note\n",
                                       "overwrite": True})),
                calls(("apply_patch", {"input": PATCH})), text("done"))
    agent, sid = ask_session(acp_agent, srv, acp_workspace, protocol)
    asked = []

    def on_request(message):
        if message["method"] != "session/request_permission":
            return None
        asked.append(message)
        return selected("approve")
    agent.prompt(sid, "change them", timeout=30, on_request=on_request)
    contents = asked_contents(asked, protocol)
    assert len(contents) == 3, contents
    files = [os.path.join(acp_workspace, n) for n in ("a.txt", "n.txt", "b.txt", "c.txt")]
    if protocol == 1:
        assert contents[0] == [{"type": "diff", "path": files[0], "oldText": "alpha\n",
                                "newText": "ALPHA\n"}]
        assert contents[1] == [{"type": "diff", "path": files[1], "oldText": "old note\n",
                                "newText": "new note\n"}]
        assert contents[2] == [{"type": "diff", "path": files[2], "oldText": "bee\n",
                                "newText": "BEE\n"},
                               {"type": "diff", "path": files[3], "oldText": "sea\n",
                                "newText": "SEA\n"}]
    else:
        def patched(item):
            assert item["type"] == "diff" and item["changes"][0]["operation"] == "modify"
            return item["changes"][0]["path"], [line for line in item["patch"]["text"].split("\n")
                                                if line and line[0] in "+-" and line[:3] not in ("---", "+++")]
        assert [patched(i) for c in contents for i in c] == [
            (files[0], ["-alpha", "+ALPHA"]), (files[1], ["-old note", "+new note"]),
            (files[2], ["-bee", "+BEE"]), (files[3], ["-sea", "+SEA"])]
    assert [read(f) for f in files] == ["ALPHA\n", "new note\n", "BEE\n", "SEA\n"]
    agent.close()


def test_an_edit_that_would_fail_asks_nobody(acp_agent, acp_workspace, srv):
    write(os.path.join(acp_workspace, "a.txt"), "alpha\n")
    srv.enqueue(calls(edit("a.txt", "not there", "x")), text("ok"))
    agent, sid = ask_session(acp_agent, srv, acp_workspace, 2)
    agent.prompt(sid, "change it", on_request=lambda m: selected("approve"))
    assert not [m for m in agent.messages if m.get("method") == "session/request_permission"]
    result = [m for m in srv.requests[-1].json["messages"] if m["role"] == "tool"][0]
    assert "not there" in result["content"] or "not found" in result["content"], result
    assert read(os.path.join(acp_workspace, "a.txt")) == "alpha\n"
    agent.close()
