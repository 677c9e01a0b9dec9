"""Checkpoints and /undo through the launcher, against the fake model server, v1 and v2:
files put back (created ones removed), the turn out of the next model request, a shell
change in a git workspace undone with the user's git state untouched, a file the user
changed since left alone and named."""

import json
import os
import shlex
import time
import shutil
import subprocess

import gevent
import pytest

from tests.support import fake_llm as f

BWRAP = shutil.which("bwrap") is not None


@pytest.fixture
def srv():
    server = f.FakeLLMServer().start()
    yield server
    server.stop()


def agent_on(acp_agent, server, protocol):
    return acp_agent(args=("--provider", "openai", "--model", "m"), protocol=protocol,
                     env={"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "sk-t-123456"})


def calls(*tools):
    """One model answer making the tool calls ``(name, arguments)``."""
    chunks = [f.oa_tool(i, f"call_{i}", name, json.dumps(args))
              for i, (name, args) in enumerate(tools)]
    return f.openai_sse(*chunks, f.oa_finish("tool_calls"))


def text(words):
    return f.openai_sse(f.oa_text(words), f.oa_finish("stop"))


def said(updates):
    return "".join(u["content"]["text"] for u in updates
                   if u["sessionUpdate"] == "agent_message_chunk")


def read(path):
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def write(path, content):
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(content)


def edit(path, old, new):
    return ("edit_file", {"path": path, "edits": [{"old_text": old, "new_text": new}]})


@pytest.mark.parametrize("protocol", [2, 1])
def test_undo_puts_files_back_and_takes_the_turn_out_of_the_conversation(
        acp_agent, acp_workspace, srv, protocol):
    root = acp_workspace
    write(f"{root}/a.txt", "one\ntwo\n")
    write(f"{root}/gone.txt", "bye\n")
    srv.enqueue(calls(("create_file", {"path": "new/made.txt", "content": "fresh\n"}),
                      edit("a.txt", "two", "TWO")),
                text("Done: made and edited."),
                text("Hello again."))
    agent = agent_on(acp_agent, srv, protocol)
    sid = agent.new_session(root)
    _, updates, _ = agent.prompt(sid, "please make SECRET-TASK changes", timeout=30)
    assert read(f"{root}/a.txt") == "one\nTWO\n" and read(f"{root}/new/made.txt") == "fresh\n"

    _, updates, _ = agent.prompt(sid, "/undo", timeout=30)
    report = said(updates)
    assert "Restored: a.txt" in report and "new/made.txt" in report, report
    assert read(f"{root}/a.txt") == "one\ntwo\n"
    assert not os.path.exists(f"{root}/new/made.txt")
    assert read(f"{root}/gone.txt") == "bye\n"

    agent.prompt(sid, "hi", timeout=30)
    last = srv.requests[-1].json
    sent = json.dumps(last["messages"])
    assert "SECRET-TASK" not in sent and "made and edited" not in sent and "/undo" not in sent
    assert "hi" in sent

    _, updates, _ = agent.prompt(sid, "/undo", timeout=30)
    assert "It changed no files" in said(updates)
    _, updates, _ = agent.prompt(sid, "/undo", timeout=30)
    assert said(updates).startswith("Nothing to undo")

    agent.close()  # replay (after a restart) shows the undone turns as undone
    agent = agent_on(acp_agent, srv, protocol)
    method, params = ("session/load", {"mcpServers": []}) if protocol == 1 else \
        ("session/resume", {"replayFrom": {"type": "start"}})
    start = len(agent.messages)
    assert "result" in agent.request(method, dict(params, sessionId=sid, cwd=root))
    replayed = [m["params"]["update"] for m in agent.messages[start:]
                if m.get("method") == "session/update"]
    if protocol == 1:  # a chunk per content block
        prompts = [u["content"]["text"] for u in replayed
                   if u["sessionUpdate"] == "user_message_chunk"]
        prompts = [a + b if a.startswith("[undone") else b
                   for a, b in zip([""] + prompts, prompts) if not b.startswith("[undone")]
    else:  # one user_message with its blocks
        prompts = ["".join(b.get("text", "") for b in u["content"]) for u in replayed
                   if u["sessionUpdate"] == "user_message"]
    assert "[undone by /undo] please make SECRET-TASK changes" in prompts, prompts
    assert "[undone by /undo] hi" in prompts and "/undo" in prompts


def test_undo_leaves_a_file_the_user_changed_since_and_names_it(acp_agent, acp_workspace, srv):
    root = acp_workspace
    write(f"{root}/a.txt", "one\n")
    write(f"{root}/b.txt", "bee\n")
    srv.enqueue(calls(edit("a.txt", "one", "ONE"), edit("b.txt", "bee", "BEE")),
                text("Edited both."))
    agent = agent_on(acp_agent, srv, 2)
    sid = agent.new_session(root)
    agent.prompt(sid, "edit them", timeout=30)
    write(f"{root}/a.txt", "mine now\n")  # the user edits after the turn
    _, updates, _ = agent.prompt(sid, "/undo", timeout=30)
    report = said(updates)
    assert "Left alone (changed since that turn" in report and "a.txt" in report
    assert "Restored: b.txt" in report
    assert read(f"{root}/a.txt") == "mine now\n" and read(f"{root}/b.txt") == "bee\n"


def git(root, *args):
    return subprocess.run(("git", *args), cwd=root, check=True, capture_output=True,
                          text=True, env=dict(os.environ, GIT_CONFIG_GLOBAL=os.devnull,
                                              GIT_CONFIG_NOSYSTEM="1",
                                              GIT_OPTIONAL_LOCKS="0")).stdout


def git_state(root):
    """Everything of the user's git state the undo must not touch (read without the
    index refresh ``git status`` would write)."""
    return (git(root, "status", "--porcelain=v1", "--untracked-files=all"),
            git(root, "rev-parse", "HEAD"), git(root, "symbolic-ref", "HEAD"),
            git(root, "diff", "--cached"), git(root, "stash", "list"),
            git(root, "for-each-ref"), open(f"{root}/.git/index", "rb").read(),
            os.stat(f"{root}/.git/index").st_mtime_ns, sorted(os.listdir(f"{root}/.git")))


@pytest.mark.skipif(not BWRAP and not os.environ.get("CI"), reason="bubblewrap is not installed")
@pytest.mark.parametrize("protocol", [2, 1])
def test_undo_of_a_shell_change_in_a_git_workspace_keeps_the_users_git_state(
        acp_agent, acp_workspace, srv, protocol):
    root = acp_workspace
    git(root, "init", "-q", "-b", "work")
    git(root, "config", "user.email", "u@example.com")
    git(root, "config", "user.name", "U")
    write(f"{root}/tracked.txt", "v1\n")
    write(f"{root}/doomed.txt", "keep me\n")
    write(f"{root}/.gitignore", "ignored/\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "first")
    write(f"{root}/tracked.txt", "v2 staged\n")
    git(root, "add", "tracked.txt")  # something staged
    write(f"{root}/tracked.txt", "v3 in the tree\n")  # and a different unstaged change
    write(f"{root}/loose.txt", "untracked\n")
    before = git_state(root)
    command = ("echo changed > tracked.txt; rm doomed.txt; echo new > created.txt; "
               "chmod +x loose.txt; echo x > loose.txt")
    srv.enqueue(calls(("shell", {"command": command})), text("Ran it."))
    agent = agent_on(acp_agent, srv, protocol)
    sid = agent.new_session(root)
    agent.prompt(sid, "run the script", timeout=30)
    assert read(f"{root}/tracked.txt") == "changed\n" and not os.path.exists(f"{root}/doomed.txt")

    _, updates, _ = agent.prompt(sid, "/undo", timeout=30)
    report = said(updates)
    assert "created.txt" in report and "doomed.txt" in report, report
    assert read(f"{root}/tracked.txt") == "v3 in the tree\n"
    assert read(f"{root}/doomed.txt") == "keep me\n"
    assert read(f"{root}/loose.txt") == "untracked\n"
    assert not os.access(f"{root}/loose.txt", os.X_OK)
    assert not os.path.exists(f"{root}/created.txt")
    assert git_state(root) == before


@pytest.mark.skipif(not BWRAP and not os.environ.get("CI"), reason="bubblewrap is not installed")
def test_undo_says_shell_changes_outside_git_were_not_recorded(acp_agent, acp_workspace, srv):
    srv.enqueue(calls(("shell", {"command": "echo x > made-by-shell.txt"})), text("Ran."))
    agent = agent_on(acp_agent, srv, 2)
    sid = agent.new_session(acp_workspace)
    agent.prompt(sid, "run", timeout=30)
    _, updates, _ = agent.prompt(sid, "/undo", timeout=30)
    report = said(updates)
    assert "not a git repository" in report and "Not restored" in report, report
    assert os.path.exists(f"{acp_workspace}/made-by-shell.txt")  # said, not silently skipped


PATCH = """*** Begin Patch
*** Update File: a.txt
@@
 one
-two
+TWO
*** Add File: added.txt
+new file
*** Delete File: gone.txt
*** Update File: old.txt
*** Move to: moved.txt
@@
-keep
+kept
*** End Patch"""


@pytest.mark.parametrize("protocol", [2, 1])
def test_undo_puts_back_what_apply_patch_changed(acp_agent, acp_workspace, srv, protocol):
    root = acp_workspace
    write(f"{root}/a.txt", "one\ntwo\n")
    write(f"{root}/gone.txt", "bye\n")
    write(f"{root}/old.txt", "keep\n")
    srv.enqueue(calls(("apply_patch", {"input": PATCH})), text("Patched."))
    agent = agent_on(acp_agent, srv, protocol)
    sid = agent.new_session(root)
    agent.prompt(sid, "patch it", timeout=30)
    assert read(f"{root}/a.txt") == "one\nTWO\n" and read(f"{root}/added.txt") == "new file\n"
    assert read(f"{root}/moved.txt") == "kept\n"
    assert not os.path.exists(f"{root}/gone.txt") and not os.path.exists(f"{root}/old.txt")

    _, updates, _ = agent.prompt(sid, "/undo", timeout=30)
    assert read(f"{root}/a.txt") == "one\ntwo\n", said(updates)
    assert read(f"{root}/gone.txt") == "bye\n" and read(f"{root}/old.txt") == "keep\n"
    assert not os.path.exists(f"{root}/added.txt") and not os.path.exists(f"{root}/moved.txt")


SWAPPER = """import ctypes, os, select, struct, time
libc = ctypes.CDLL(None, use_errno=True)
def swap():  # sub <-> link, atomically (renameat2 RENAME_EXCHANGE)
    libc.renameat2(-100, b"sub", -100, b"link", 2)
os.symlink(%r, "link")
watch = libc.inotify_init1(0)
libc.inotify_add_watch(watch, b"sub", 0x20 | 0x200)  # IN_OPEN, IN_DELETE
libc.inotify_add_watch(watch, b"link", 0x200)
while not os.path.exists("go"):
    time.sleep(0.002)
open("going", "w").close()
linked = False
while True:  # the agent opens a file of sub: swap the link in for a moment
    if linked and not select.select([watch], [], [], 0.001)[0]:
        swap()
        linked = False
        continue
    data = os.read(watch, 65536)
    while data:
        _wd, mask, _cookie, size = struct.unpack("iIII", data[:16])
        data = data[16 + size:]
        if mask & 0x20 and not linked or mask & 0x200 and linked:
            swap()
            linked = not linked
"""


@pytest.mark.acp_process
@pytest.mark.skipif(not BWRAP and not os.environ.get("CI"), reason="bubblewrap is not installed")
def test_undo_while_a_background_process_swaps_the_folder_for_a_symlink(
        acp_agent, acp_workspace, srv, tmp_path):
    """A background process of the session keeps swapping the folder of the turn's files
    with a symlink to a folder outside holding the same files: /undo removes and restores
    only inside the workspace (through folder descriptors, the process frozen meanwhile),
    nothing outside is removed, written or left behind."""
    root, outside = acp_workspace, tmp_path / "outside"
    outside.mkdir()
    os.mkdir(f"{root}/sub")
    names = [f"f{i}.txt" for i in range(150)]
    for name in names + ["kept.txt"]:
        write(str(outside / name), "made by the turn\n")
    write(f"{root}/sub/kept.txt", "before\n")
    patch = "\n".join(["*** Begin Patch", "*** Update File: sub/kept.txt", "@@",
                       "-before", "+made by the turn"]
                      + [f"*** Add File: sub/{n}\n+made by the turn" for n in names]
                      + ["*** End Patch"])
    swapper = "python3 -c " + shlex.quote(SWAPPER % str(outside))
    srv.enqueue(calls(("apply_patch", {"input": patch}),
                      ("shell", {"command": swapper, "background": True, "wait_seconds": 0})),
                text("Started."))
    agent = agent_on(acp_agent, srv, 2)
    sid = agent.new_session(root)
    agent.prompt(sid, "make them and start the swapper", timeout=60)
    assert sorted(os.listdir(f"{root}/sub")) == sorted(names + ["kept.txt"])
    write(f"{root}/go", "")
    deadline = time.monotonic() + 10
    while not os.path.exists(f"{root}/going"):  # the swapper is at work
        assert time.monotonic() < deadline, "the swapper did not start"
        gevent.sleep(0.005)
    _, updates, _ = agent.prompt(sid, "/undo", timeout=60)
    assert "Undid" in said(updates), said(updates)
    agent.close()
    assert sorted(os.listdir(outside)) == sorted(names + ["kept.txt"])
    for name in names + ["kept.txt"]:
        assert read(str(outside / name)) == "made by the turn\n", name
