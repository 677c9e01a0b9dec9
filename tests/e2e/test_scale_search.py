"""grep's long scans in ripgrep, through the launcher: the same answers the walker gives on a
tree with ignored folders, a symlink out of the root and a binary file, and a cancel during
a long scan ends it at once (the rg process too)."""

import os
import time

import pytest

from term2acp import sandbox
from term2acp.tools import ripgrep
from term2acp.tools.search import GlobTool, GrepTool
from tests.support.clock import within
from tests.support.toolctx import tool_context

pytestmark = [pytest.mark.acp_process, pytest.mark.skipif(
    ripgrep.binary() is None or not sandbox.probe().available,
    reason="needs rg (the ripgrep wheel) and the sandbox")]

HANG = [{"hang": True}]


def call(name, **arguments):
    return {"tool_call": {"name": name, "arguments": arguments}}


def write(root, rel, data, mode="w"):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, mode) as fh:
        fh.write(data)
    return path


def filler(root, count, size=(2 << 20) - 1):
    """``count`` hard links to one file without the needle: seconds of scanning, no disk."""
    first = write(root, "fill/f0000.txt", ("abcdefghij " * 9 + "\n") * (size // 100))
    for i in range(1, count):
        os.link(first, os.path.join(root, "fill", f"f{i:04}.txt"))


def final_texts(agent):
    done = {}
    for m in agent.messages:
        update = m.get("params", {}).get("update", {}) if m.get("method") == "session/update" else {}
        if update.get("sessionUpdate") == "tool_call_update" and "status" in update:
            done[update["toolCallId"]] = update
    return [(u["status"], "".join(c["content"]["text"] for c in u.get("content") or ()
                                  if c.get("type") == "content")) for u in done.values()]


CALLS = [("grep", {"pattern": "needle"}), ("grep", {"pattern": "needle", "context": 1}),
         ("grep", {"pattern": "NEEDLE", "ignore_case": True, "output_mode": "count"}),
         ("grep", {"pattern": "needle", "output_mode": "files_with_matches", "head_limit": 3,
                   "offset": 1}),
         ("grep", {"pattern": "needle", "path": "src", "type": "py"}),
         ("glob", {"pattern": "**/*"}), ("glob", {"pattern": "src/**", "sort": "newest"})]


def test_grep_and_glob_answer_as_the_walker_did(started, workspace, tmp_path, monkeypatch):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("needle outside the root\n")
    write(workspace, ".gitignore", "build/\nnode_modules/\n")
    write(workspace, "build/out.txt", "needle built\n")
    write(workspace, "web/node_modules/lib/index.js", "needle in a dependency\n")
    write(workspace, "src/app.py", "def needle():\n    return 1\n")
    write(workspace, "src/gen/.gitignore", "*.py\n")
    write(workspace, "src/gen/model.py", "needle generated\n")
    write(workspace, "notes.txt", "a needle, a NEEDLE\n")
    write(workspace, "data/blob.bin", b"needle\0\1\2", "wb")
    os.symlink(outside, os.path.join(workspace, "src", "linked"))
    filler(workspace, 40)  # more than the walker's head start: ripgrep answers
    ctx = tool_context(workspace, tmp_path)
    monkeypatch.setattr(ripgrep, "usable", lambda *a: False)
    tools = {"grep": GrepTool(), "glob": GlobTool()}
    before = [tools[name].run(tools[name].load(args), ctx).text for name, args in CALLS]
    agent, sid = started([[call(name, **args) for name, args in CALLS], [{"text": "done"}]])
    _, _, idle = agent.prompt(sid, "search", timeout=120)
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    answers = final_texts(agent)
    assert [status for status, _ in answers] == ["completed"] * len(CALLS)
    assert [text for _, text in answers] == before
    assert before[0].splitlines()[:3] == ["notes.txt:1: a needle, a NEEDLE", "src/app.py:1: def needle():",
                                          "[skipped 1 binary files and 0 files over 2 MiB.]"]
    assert "outside the root" not in str(answers) and "secret.txt" not in str(answers)
    agent.close()


def rg_searching(workspace):
    """Pids of rg processes searching ``workspace``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
        except OSError:
            continue
        if os.path.basename(argv[0]) == b"rg" and os.fsencode(workspace) + b"/" in argv:
            found.append(pid)
    return found


def wait_for(predicate, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_a_cancel_during_a_long_scan_ends_it_at_once(started, workspace):
    filler(workspace, 600)  # 1.2 GB to read: seconds of ripgrep
    agent, sid = started([[call("grep", pattern="(?i)(\\w+\\s+){3}zq")], HANG])
    agent.prompt_async(sid, "search")
    assert wait_for(lambda: rg_searching(workspace), within(20)), "".join(agent._stderr)[-3000:]
    listed = agent.request("session/list", {}, timeout=within(1))  # served while it scans
    assert [s["sessionId"] for s in listed["result"]["sessions"]] == [sid]
    cancelled = time.monotonic()
    agent.notify("session/cancel", {"sessionId": sid})
    idle = agent.wait_update(state="idle", timeout=within(5))
    assert idle["stopReason"] == "cancelled"
    assert time.monotonic() - cancelled < within(1.0)
    assert wait_for(lambda: not rg_searching(workspace), within(2)), "rg outlived the cancel"
    [(status, _)] = final_texts(agent)
    assert status == "cancelled"
    agent.close()
