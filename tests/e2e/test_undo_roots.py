"""/undo and /rewind in a session's additional roots, through the launcher against the fake
model server, v1 and v2: what the file tools and a command changed in an additional root
(a git work tree of its own) is put back as in the main root, all in one report; a command
in an additional root outside git is named as not recorded there."""

import os

import pytest

from tests.e2e.test_fork_delete import PROTOCOLS, start
from tests.e2e.test_roots import new_with_roots
from tests.e2e.test_undo import (BWRAP, calls, edit, git, git_state, read, said, srv,  # noqa: F401
                                 text, write)

needs_sandbox = pytest.mark.skipif(not BWRAP and not os.environ.get("CI"),
                                   reason="bubblewrap is not installed")


def git_root(path):
    os.makedirs(path)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "u@example.com")
    git(path, "config", "user.name", "U")
    write(f"{path}/tracked.txt", "v1\n")
    write(f"{path}/edited.txt", "old words\n")
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "first")
    return os.path.realpath(path)


@pytest.mark.acp_process
@needs_sandbox
@PROTOCOLS
def test_undo_and_rewind_put_back_an_additional_root(acp_agent, acp_workspace, srv, tmp_path,
                                                     protocol):
    other = git_root(str(tmp_path / "other"))
    before = git_state(other)
    srv.enqueue(calls(edit(f"{other}/edited.txt", "old words", "new words"),
                      ("create_file", {"path": f"{other}/made.txt", "content": "made\n"}),
                      ("create_file", {"path": "main.txt", "content": "main\n"})),
                calls(("shell", {"command": f"echo changed > {other}/tracked.txt; "
                                            f"rm {other}/edited.txt"})),
                text("T1-DONE"),
                calls(("create_file", {"path": f"{other}/second.txt", "content": "2\n"})),
                text("T2-DONE"))
    agent = start(acp_agent, srv, protocol)
    sid = new_with_roots(agent, protocol, acp_workspace, [other])
    agent.prompt(sid, "change both roots", timeout=30)
    assert read(f"{other}/tracked.txt") == "changed\n"
    assert not os.path.exists(f"{other}/edited.txt")
    agent.prompt(sid, "one more", timeout=30)
    assert os.path.exists(f"{other}/second.txt")

    report = said(agent.prompt(sid, "/undo", timeout=30)[1])
    assert f"Removed (created by that turn): {other}/second.txt." in report, report
    assert not os.path.exists(f"{other}/second.txt")

    report = said(agent.prompt(sid, "/rewind 1", timeout=30)[1])
    assert "Restored:" in report and f"{other}/edited.txt" in report, report
    assert f"{other}/tracked.txt" in report and f"{other}/made.txt" in report, report
    assert "main.txt" in report and f"{other} is not a git" not in report, report
    assert "the workspace is not a git repository" in report, report  # the main root is not
    assert read(f"{other}/tracked.txt") == "v1\n"
    assert read(f"{other}/edited.txt") == "old words\n"
    assert not os.path.exists(f"{other}/made.txt")
    assert not os.path.exists(os.path.join(acp_workspace, "main.txt"))
    assert git_state(other) == before  # the user's git state there is untouched
    assert [n for n in os.listdir(other) if n.startswith(".term2")] == []
    agent.close()


@pytest.mark.acp_process
@needs_sandbox
def test_a_command_in_an_additional_root_outside_git_is_named(acp_agent, acp_workspace, srv,
                                                              tmp_path):
    other = os.path.realpath(tmp_path / "plain")
    os.makedirs(other)
    srv.enqueue(calls(("shell", {"command": f"echo x > {other}/by-shell.txt"})), text("Ran."))
    agent = start(acp_agent, srv, 2)
    sid = new_with_roots(agent, 2, acp_workspace, [other])
    agent.prompt(sid, "run", timeout=30)
    report = said(agent.prompt(sid, "/undo", timeout=30)[1])
    assert f"{other} is not a git repository" in report and "Not restored" in report, report
    assert os.path.exists(f"{other}/by-shell.txt")  # said, not silently skipped
    agent.close()
