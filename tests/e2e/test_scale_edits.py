"""Edits of big files through the launcher: edit_file and apply_patch change exactly one line
of a 50 MB file and show only the changed region; a file over ``[tools] edit_max_mb`` is
refused with a message naming the key."""

import hashlib
import json
import os

import pytest

from tests.support.toolcalls import call_text, finished_calls

pytestmark = pytest.mark.acp_process

LINE = "2026-12-06 01:00:00 INFO request served in 12 ms from worker {n}\n"


def call(name, **arguments):
    return {"tool_call": {"name": name, "arguments": arguments}}


def finals(agent):
    return finished_calls([m["params"]["update"] for m in agent.messages
                           if m.get("method") == "session/update"])


def test_edits_of_a_50_mb_file_change_exactly_that_text(started, workspace):
    lines = [LINE.format(n=n) for n in range(800_000)]
    path = os.path.join(workspace, "big.log")
    with open(path, "w") as fh:
        fh.write("".join(lines))
    assert os.path.getsize(path) > 50_000_000
    first, second = lines[300_000].rstrip("\n"), lines[600_000].rstrip("\n")
    patch = (f"*** Begin Patch\n*** Update File: big.log\n {lines[599_999].rstrip()}\n"
             f"-{second}\n+{second} (patched)\n {lines[600_001].rstrip()}\n*** End Patch")
    agent, sid = started([[call("edit_file", path="big.log", edits=[
        {"old_text": first, "new_text": first.replace("INFO", "WARN")}])],
        [call("apply_patch", input=patch)], [{"text": "done"}]])
    _, _, idle = agent.prompt(sid, "edit", timeout=180)
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    edit, patched = finals(agent)
    assert [edit["status"], patched["status"]] == ["completed", "completed"]
    lines[300_000] = lines[300_000].replace("INFO", "WARN")
    lines[600_000] = lines[600_000].rstrip("\n") + " (patched)\n"
    with open(path, "rb") as fh:
        assert hashlib.sha256(fh.read()).hexdigest() == hashlib.sha256(
            "".join(lines).encode()).hexdigest()
    for update, number in ((edit, 300_000), (patched, 600_000)):
        [diff] = [c for c in update["content"] if c["type"] == "diff"]
        patch = diff["patch"]["text"].splitlines()
        assert f"@@ -{number - 2},7 +{number - 2},7 @@" in patch  # the file's line numbers
        assert "+" + lines[number].rstrip("\n") in patch
        assert len(json.dumps(update)) < 10_000  # the region, not 2 x 50 MB
    assert edit["locations"][0]["line"] == 300_001
    agent.close()


def test_a_file_over_the_configured_limit_is_refused_naming_the_key(started, workspace,
                                                                    tmp_path):
    (tmp_path / "config.toml").write_text("[tools]\nedit_max_mb = 1\n")  # the agent's config
    with open(os.path.join(workspace, "big.log"), "w") as fh:
        fh.write(LINE.format(n=1) * 20_000)  # 1.3 MB
    agent, sid = started([[call("edit_file", path="big.log", edits=[
        {"old_text": "worker 1", "new_text": "worker 2", "replace_all": True}])],
        [call("apply_patch", input="*** Begin Patch\n*** Update File: big.log\n"
                                   "-" + LINE.format(n=1) + "*** End Patch")],
        [{"text": "done"}]])
    agent.prompt(sid, "edit", timeout=60)
    updates = finals(agent)
    assert [u["status"] for u in updates] == ["failed", "failed"]
    for update in updates:
        text = call_text(update)
        assert "above the 1 MiB edit limit ([tools] edit_max_mb in the config file)" in text
    with open(os.path.join(workspace, "big.log")) as fh:
        assert fh.read() == LINE.format(n=1) * 20_000
    agent.close()
