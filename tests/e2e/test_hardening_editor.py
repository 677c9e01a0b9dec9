"""Issue 23, high 1 and 2: the v1 editor's fs/* methods never reach outside the workspace.

The fake editor here is the test kit's (``AgentProcess._serve_file``): like every editor, it
opens the path it is given and follows symlinks. The attack swaps ``ws/a`` for a symlink to
a file outside while the agent waits for the editor's answer, from a ``run_code`` snippet
(a sandboxed process alive during the call) or, for the re-check after the answer, by the
editor itself (a change no sandbox made)."""

import os
import shutil
import time

import pytest

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None and not os.environ.get("CI"),
                                 reason="bubblewrap is not installed")

# The snippet calls the tool in a thread; the main thread swaps ws/a for a symlink to the
# outside file as soon as the editor holds the request (the editor drops "asked"), then tells
# the editor ("swapped"). When no request reaches the editor, the thread just finishes.
SWAP_SNIPPET = """
import os, threading, time
result = {}
def call():
    try:
        result["text"] = tools.%s
    except ToolCallError as exc:
        result["error"] = str(exc)
worker = threading.Thread(target=call)
worker.start()
deadline = time.monotonic() + 15
while worker.is_alive() and not os.path.exists("asked") and time.monotonic() < deadline:
    time.sleep(0.005)
if os.path.exists("asked"):
    os.rename("a", "a.orig")
    os.symlink(%r, "a")
    open("swapped", "w").close()
worker.join()
print("RESULT", result)
"""


def call(name, **arguments):
    return {"tool_call": {"name": name, "arguments": arguments}}


def slow_editor(agent, workspace, method):
    """The editor: on ``method``, say so and wait (bounded) for the swap, then serve the
    path following symlinks. Returns the list of requests it got for ``method``."""
    seen = []

    def editor(message):
        if message["method"] == method:
            seen.append(message["params"]["path"])
            open(os.path.join(workspace, "asked"), "w").close()
            deadline = time.monotonic() + 15
            while not os.path.exists(os.path.join(workspace, "swapped")):
                assert time.monotonic() < deadline, "the snippet never swapped"
                time.sleep(0.005)
        if message["method"].startswith("fs/"):
            return agent._serve_file(message)
        return None
    return editor, seen


def final_texts(updates):
    """Every text a tool call showed: its content and its streamed terminal output."""
    out = []
    for update in updates:
        if update.get("sessionUpdate") != "tool_call_update":
            continue
        out += [c["content"]["text"] for c in update.get("content") or ()
                if c.get("type") == "content"]
        out.append((update.get("_meta") or {}).get("terminal_output", {}).get("data", ""))
    return "\n".join(out)


@pytest.fixture
def setup(acp_agent, acp_workspace, tmp_path):
    secret = tmp_path / "home-secret.txt"
    secret.write_text("SECRET-FROM-HOME\n")
    with open(os.path.join(acp_workspace, "a"), "w") as fh:
        fh.write("inside the workspace\n")

    def start(turns):
        agent = acp_agent(turns=turns, protocol=1)
        return agent, agent.new_session(acp_workspace)
    return start, str(secret)


@needs_bwrap
def test_a_read_from_run_code_never_hands_the_editor_a_swappable_path(setup, acp_workspace):
    start, secret = setup
    code = SWAP_SNIPPET % ("read_file(path='a')", secret)
    agent, sid = start([[call("run_code", code=code)], [{"text": "ok"}]])
    editor, seen = slow_editor(agent, acp_workspace, "fs/read_text_file")
    _, updates, _ = agent.prompt(sid, "go", on_request=editor)
    shown = final_texts(updates)
    assert "RESULT" in shown and "inside the workspace" in shown
    assert "SECRET-FROM-HOME" not in shown
    assert seen == []  # a sandboxed process was alive: the read was local and fd-checked
    agent.close()


@needs_bwrap
def test_a_write_from_run_code_never_hands_the_editor_a_swappable_path(setup, acp_workspace):
    start, secret = setup
    code = SWAP_SNIPPET % ("create_file(path='a', content='PWNED\\n', overwrite=True)", secret)
    agent, sid = start([[call("run_code", code=code)], [{"text": "ok"}]])
    editor, seen = slow_editor(agent, acp_workspace, "fs/write_text_file")
    _, updates, _ = agent.prompt(sid, "go", on_request=editor)
    assert open(secret).read() == "SECRET-FROM-HOME\n"
    assert seen == []
    assert open(os.path.join(acp_workspace, "a")).read() == "PWNED\n"  # written locally
    agent.close()


def test_a_path_swapped_while_the_editor_reads_is_refused(setup, acp_workspace):
    start, secret = setup
    agent, sid = start([[call("read_file", path="a")], [{"text": "ok"}]])
    path = os.path.join(acp_workspace, "a")

    def editor(message):  # something outside any sandbox swaps the file mid-call
        if message["method"] == "fs/read_text_file":
            os.rename(path, path + ".orig")
            os.symlink(secret, path)
        return agent._serve_file(message) if message["method"].startswith("fs/") else None
    _, updates, _ = agent.prompt(sid, "go", on_request=editor)
    shown = final_texts(updates)
    assert "SECRET-FROM-HOME" not in shown and "changed while the editor read it" in shown
    assert [u["status"] for u in updates if u.get("status")][-1] == "failed"
    agent.close()


def test_a_target_swapped_while_the_editor_saves_fails_the_call(setup, acp_workspace):
    start, secret = setup
    agent, sid = start([[call("create_file", path="a", content="new\n", overwrite=True)],
                        [{"text": "ok"}]])
    path = os.path.join(acp_workspace, "a")

    def editor(message):
        if message["method"] == "fs/write_text_file":
            os.rename(path, path + ".orig")
            os.symlink(secret, path)
        return agent._serve_file(message) if message["method"].startswith("fs/") else None
    _, updates, _ = agent.prompt(sid, "go", on_request=editor)
    shown = final_texts(updates)
    assert "swapped while the editor saved it" in shown
    assert [u["status"] for u in updates if u.get("status")][-1] == "failed"
    agent.close()


def test_missing_directories_for_an_editor_write_are_made_inside_the_root(setup, acp_workspace):
    start, _ = setup
    agent, sid = start([[call("create_file", path="d/e/f.txt", content="x\n")], [{"text": "ok"}]])
    agent.prompt(sid, "go")  # the kit's editor serves fs/* from the disk
    assert [m["params"]["path"] for m in agent.fs_requests] == [
        os.path.join(acp_workspace, "d", "e", "f.txt")]
    assert open(os.path.join(acp_workspace, "d", "e", "f.txt")).read() == "x\n"
    agent.close()



def test_an_editor_buffer_over_the_edit_limit_is_refused_never_truncated(setup, acp_workspace,
                                                                         tmp_path):
    (tmp_path / "config.toml").write_text("[tools]\nedit_max_mb = 4\n")  # the agent's config
    start, _ = setup
    edit = call("edit_file", path="a", edits=[{"old_text": "inside", "new_text": "changed"}])
    agent, sid = start([[edit], [{"text": "ok"}]])
    big = "inside the workspace\n" + "x" * (5 * 1024 * 1024) + "\n"

    def editor(message):  # the unsaved buffer is 5 MiB; the file on disk is small
        if message["method"] == "fs/read_text_file":
            return {"content": big}
        return None
    _, updates, _ = agent.prompt(sid, "go", timeout=60, on_request=editor)
    assert "edit limit ([tools] edit_max_mb" in final_texts(updates)
    assert [u["status"] for u in updates if u.get("status")][-1] == "failed"
    assert agent.fs_requests == []  # no fs/write_text_file: nothing was saved
    agent.close()


@needs_bwrap
def test_while_a_background_command_runs_reads_stay_local(setup, acp_workspace):
    # A sibling of the run_code swap: a background command is a sandboxed process alive
    # between turns; it could swap ws/a while the editor reads it.
    start, _ = setup
    agent, sid = start([[call("shell", command="sleep 30", background=True)],
                        [call("read_file", path="a")], [{"text": "ok"}]])
    _, updates, _ = agent.prompt(sid, "go", timeout=60)
    assert "inside the workspace" in final_texts(updates)
    assert agent.fs_requests == []  # read locally, fd-checked
    agent.close()
