"""Issue 10, runtime and wire: the attacks of the adversarial review, through the launcher.

Cancel/close racing an allow, kill -9 during a tool call, a client that stops reading,
deep nesting, lone surrogates, many live sessions, a damaged store.
"""

import contextlib
import fcntl
import glob
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from term2acp.testing.harness import REPO_LAUNCHER, is_idle
from tests.support import fake_llm as f
from tests.support.scripts import write_script
from tests.support.clock import within

ALLOW = {"outcome": {"outcome": "selected", "optionId": "allow-once"}}
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None and not os.environ.get("CI"),
                                 reason="bubblewrap is not installed")


def line(message):
    return json.dumps(message).encode() + b"\n"


def is_permission(message):
    return message.get("method") == "session/request_permission" and "id" in message


def answer(request_id, result):
    return line({"jsonrpc": "2.0", "id": request_id, "result": result})


def error_of(message):
    assert "error" in message, message
    return message["error"]


def statuses(agent, sid):
    out = {}
    for m in agent.messages:
        if m.get("method") == "session/update" and m["params"]["sessionId"] == sid:
            u = m["params"]["update"]
            if u["sessionUpdate"] == "tool_call_update" and "status" in u:
                out[u["toolCallId"]] = u["status"]
    return out


# ---------------------------------------------------------------- item 4: cancel/close vs allow
def _race(agent, workspace, target, how, rounds):
    for n in range(rounds):
        sid = agent.new_session(workspace)
        agent.prompt_async(sid, "write outside")
        request = agent.wait_for(is_permission, timeout=30)
        if how.startswith("cancel"):
            stop = line({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
        else:
            stop = line({"jsonrpc": "2.0", "id": f"close-{n}", "method": "session/close",
                         "params": {"sessionId": sid}})
        if how.endswith("-split"):  # two writes, the allow right behind
            agent.send_raw(stop)
            agent.send_raw(answer(request["id"], ALLOW))
        else:  # one write: the agent reads both before anything else is scheduled
            agent.send_raw(stop + answer(request["id"], ALLOW))
        idle = agent.wait_for(lambda m: is_idle(m, sid), timeout=30)
        assert idle["params"]["update"]["stopReason"] == "cancelled", (how, n)
        if how.startswith("close"):
            agent.wait_for(lambda m: m.get("id") == f"close-{n}", timeout=30)
        assert not os.path.exists(target), f"{how} round {n}: the allow won"
        assert "completed" not in statuses(agent, sid).values()


@pytest.mark.parametrize("how", ["cancel", "close", "cancel-split", "close-split"])
def test_cancel_or_close_in_the_same_write_as_an_allow_never_writes(spawn, workspace, tmp_path, how):
    target = str(tmp_path / "outside" / "leak.txt")
    os.makedirs(os.path.dirname(target))
    turns = [[{"tool_call": {"name": "create_file",
                             "arguments": {"path": target, "content": "leaked\n"}}}],
             [{"text": "done"}]]
    agent = spawn(script=write_script(tmp_path, turns))
    agent.initialize()
    _race(agent, workspace, target, how, rounds=12)
    agent.close()


@needs_bwrap
@pytest.mark.parametrize("how", ["cancel", "close"])
def test_cancel_or_close_racing_an_allow_inside_run_code_never_writes(spawn, workspace, tmp_path, how):
    target = str(tmp_path / "outside" / "leak.txt")
    os.makedirs(os.path.dirname(target))
    code = f"tools.create_file(path={target!r}, content='leaked')\nprint('wrote')\n"
    turns = [[{"tool_call": {"name": "run_code", "arguments": {"code": code}}}],
             [{"text": "done"}]]
    agent = spawn(script=write_script(tmp_path, turns))
    agent.initialize()
    _race(agent, workspace, target, how, rounds=5)
    agent.close()


# ---------------------------------------------------------------- item 5: kill -9 during a tool call
def test_kill_9_during_a_tool_call_is_closed_as_interrupted_on_resume(spawn, workspace, tmp_path):
    server = f.FakeLLMServer().start()
    try:
        outside = str(tmp_path / "elsewhere.txt")
        server.enqueue(
            f.openai_sse(f.oa_text("Writing."),
                         f.oa_tool(0, "call_a", "read_file", '{"path": "a.txt"}'),
                         f.oa_tool(1, "call_b", "create_file",
                                   json.dumps({"path": outside, "content": "x"})),
                         f.oa_finish("tool_calls")),
            f.openai_sse(f.oa_text("Recovered."), f.oa_finish("stop")))
        with open(os.path.join(workspace, "a.txt"), "w") as fh:
            fh.write("alpha\n")
        env = {"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "x"}
        args = ("--provider", "openai", "--model", "fake-model")
        agent = spawn(*args, env=env, process=True)  # killed: the agents after it resume
        agent.initialize()
        sid = agent.new_session(workspace)
        agent.prompt_async(sid, "go")
        agent.wait_for(is_permission, timeout=30)  # call_b waits for its approval
        os.kill(agent.proc.pid, signal.SIGKILL)
        agent.wait(5)

        again = spawn(*args, env=env)
        again.initialize()
        response = again.request("session/resume", {"sessionId": sid, "cwd": workspace,
                                                     "replayFrom": {"type": "start"}}, timeout=30)
        assert "result" in response, response
        replayed = statuses(again, sid)
        assert len(replayed) == 2 and list(replayed.values()) == ["completed", "failed"], replayed
        failed = [m["params"]["update"] for m in again.messages if m.get("method") == "session/update"
                  and m["params"]["update"].get("status") == "failed"][0]
        assert "Interrupted" in failed["content"][0]["content"]["text"]

        _, _, idle = again.prompt(sid, "and now?", timeout=30)
        assert idle["params"]["update"]["stopReason"] == "end_turn"
        request = server.wait_requests(2)[1].json
        calls = [c["id"] for m in request["messages"] if m["role"] == "assistant"
                 for c in m.get("tool_calls") or []]
        results = [m["tool_call_id"] for m in request["messages"] if m["role"] == "tool"]
        assert calls == ["call_a", "call_b"] and sorted(results) == sorted(calls)
        roles = [m["role"] for m in request["messages"]]
        first_tool = roles.index("tool")
        assert roles[first_tool - 1] == "assistant" and roles[first_tool + 1] == "tool"
        assert not os.path.exists(outside)
        again.close()

        third = spawn(*args, env=env)  # the repair was stored: a plain resume replays it too
        third.initialize()
        third.request("session/resume", {"sessionId": sid, "cwd": workspace,
                                         "replayFrom": {"type": "start"}})
        assert list(statuses(third, sid).values()) == ["completed", "failed"]
        third.close()
    finally:
        server.stop()


@needs_bwrap
def test_kill_9_during_a_shell_command_replays_it_failed_and_the_session_continues(spawn, home, workspace, tmp_path):
    os.mkfifo(os.path.join(workspace, "fifo"))
    script = write_script(tmp_path, [
        [{"tool_call": {"id": "call_sh", "name": "shell", "arguments": {"command": "cat fifo"}}}],
        [{"text": "after the crash"}]])
    agent = spawn(script=script, process=True)  # killed: the agent after it resumes
    agent.initialize()
    sid = agent.new_session(workspace)
    agent.prompt_async(sid, "read the fifo")
    agent.wait_update("terminal_update", timeout=30)  # cat is blocked on the FIFO
    os.kill(agent.proc.pid, signal.SIGKILL)
    agent.wait(5)

    again = spawn(script=script)
    again.initialize()
    again.request("session/resume", {"sessionId": sid, "cwd": workspace,
                                     "replayFrom": {"type": "start"}}, timeout=30)
    assert list(statuses(again, sid).values()) == ["failed"]
    terminal = [m["params"]["update"] for m in again.messages if m.get("method") == "session/update"
                and m["params"]["update"]["sessionUpdate"] == "terminal_update"]
    assert terminal and terminal[-1]["exitStatus"] == {"signal": "SIGKILL"}
    _, updates, idle = again.prompt(sid, "go on", timeout=30)
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    assert [u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"] == [
        "after the crash"]
    again.close()
    with contextlib.closing(sqlite3.connect(home / "sessions.sqlite3")) as db:
        history = [json.loads(r[0]) for r in db.execute(
            "SELECT message FROM history WHERE session_id = ? ORDER BY seq", (sid,))]
    # (the context note before the first prompt aside: turns/notes.py)
    assert [(m["role"], m.get("tool_call_id")) for m in history if "notes" not in m] == [
        ("user", None), ("assistant", None), ("tool", "call_sh"), ("user", None), ("assistant", None)]


# ---------------------------------------------------------------- client that stops reading
def _rss_kib(pid, field="VmRSS"):
    with open(f"/proc/{pid}/status") as fh:
        for row in fh:
            if row.startswith(field + ":"):
                return int(row.split()[1])
    raise AssertionError(f"no {field}")


def _cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _read_until(proc, buf, predicate, timeout):
    """Read stdout lines until predicate(message); returns (message, lines read, buf)."""
    deadline = time.monotonic() + timeout
    count = 0
    while True:
        while b"\n" in buf:
            raw, buf = buf.split(b"\n", 1)
            count += 1
            message = json.loads(raw)
            if predicate(message):
                return message, count, buf
        remaining = deadline - time.monotonic()
        assert remaining > 0, "condition not met in time"
        import select

        if select.select([proc.stdout], [], [], remaining)[0]:
            data = os.read(proc.stdout.fileno(), 1 << 20)
            assert data, "agent closed stdout"
            buf += data


def test_a_client_that_stops_reading_bounds_memory_and_cancel_drops_queued_chunks(agent_env, workspace, tmp_path):
    script = write_script(tmp_path, [[{"repeat": {"text": "token-" * 8, "count": 400_000}}]])
    env = dict(agent_env, TERM2ACP_SCRIPT=str(script))
    with _launched(env, "--provider", "scripted") as proc:
        proc.stdin.write(line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": 2, "info": {"name": "t", "version": "1"}}}))
        proc.stdin.write(line({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                               "params": {"cwd": workspace}}))
        new, _, buf = _read_until(proc, b"", lambda m: m.get("id") == 2, 30)
        sid = new["result"]["sessionId"]
        base = _rss_kib(proc.pid)
        proc.stdin.write(line({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
            "sessionId": sid, "prompt": [{"type": "text", "text": "talk"}]}}))
        # We stop reading. Wait (bounded) until the agent stops using CPU: it is blocked.
        _wait_until_idle_cpu(proc.pid)
        grown = _rss_kib(proc.pid) - base
        assert grown < 40 * 1024, f"RSS grew by {grown} KiB while the client did not read"
        proc.stdin.write(line({"jsonrpc": "2.0", "method": "session/cancel",
                               "params": {"sessionId": sid}}))
        start = time.monotonic()
        idle, read, buf = _read_until(proc, buf, lambda m: is_idle(m, sid), 30)
        elapsed = time.monotonic() - start
        assert idle["params"]["update"]["stopReason"] == "cancelled"
        assert elapsed < within(3), f"idle came {elapsed:.1f}s after reading resumed"
        # what was already in the pipe and in one write batch, not the whole backlog
        assert read < 5_000, f"{read} lines were still delivered after the cancel"
        proc.stdin.close()
        assert proc.wait(10) == 0


@contextlib.contextmanager
def _launched(env, *args):
    """``bin/term2-acp`` on raw pipes (the test reads and writes bytes itself); killed at
    the end if it has not exited."""
    proc = subprocess.Popen([sys.executable, REPO_LAUNCHER, *args], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, bufsize=0)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def _write_all(proc, data):
    view = memoryview(data)
    while view:  # an unbuffered pipe under gevent may take part of a large write
        view = view[proc.stdin.write(view):]


def _wait_until_idle_cpu(pid, timeout=60):
    deadline = time.monotonic() + timeout
    last, still = _cpu_ticks(pid), 0
    while still < 5:
        assert time.monotonic() < deadline, "the agent never settled"
        time.sleep(0.1)
        now = _cpu_ticks(pid)
        still = still + 1 if now == last else 0
        last = now


def test_many_large_answers_to_a_client_that_stops_reading_stay_bounded(agent_env, workspace):
    with _launched(agent_env) as proc:
        proc.stdin.write(line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": 2, "info": {"name": "t", "version": "1"}}}))
        _write_all(proc, b"".join(line({"jsonrpc": "2.0", "id": f"n{n}", "method": "session/new",
                                        "params": {"cwd": workspace}}) for n in range(50)))
        _, _, buf = _read_until(proc, b"", lambda m: m.get("id") == "n49", 60)
        base = _rss_kib(proc.pid)
        count = 3000  # each answer lists 50 sessions (~10 KB): 30 MB if all were queued
        _write_all(proc, b"".join(line({"jsonrpc": "2.0", "id": n, "method": "session/list",
                                        "params": {}}) for n in range(count)))
        _wait_until_idle_cpu(proc.pid)
        grown = _rss_kib(proc.pid) - base
        assert grown < 20 * 1024, f"RSS grew by {grown} KiB for answers nobody read"
        answers = {}
        while len(answers) < count:
            message, _, buf = _read_until(proc, buf, lambda m: isinstance(m.get("id"), int), 30)
            answers[message["id"]] = message
        refused = [m for m in answers.values() if "error" in m]
        assert refused and all(m["error"]["code"] == -32003 for m in refused)
        assert any("result" in m for m in answers.values())
        proc.stdin.write(line({"jsonrpc": "2.0", "id": "last", "method": "session/list",
                               "params": {}}))
        last, _, buf = _read_until(proc, buf, lambda m: m.get("id") == "last", 30)
        assert len(last["result"]["sessions"]) == 50
        proc.stdin.close()
        assert proc.wait(10) == 0


def test_a_flood_of_malformed_lines_to_a_client_that_stops_reading_stays_bounded(agent_env):
    with _launched(agent_env) as proc:
        _write_all(proc, line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": 2, "info": {"name": "t", "version": "1"}}}))
        _, _, buf = _read_until(proc, b"", lambda m: m.get("id") == 0, 30)
        base = _rss_kib(proc.pid)
        # each would be a ~100-byte -32700 answer: 20 MB (28 MB of RSS if queued), five
        # times the outbox bound
        _write_all(proc, b"x\n" * 200_000)
        _write_all(proc, line({"jsonrpc": "2.0", "id": "ping", "method": "session/list",
                               "params": {}}))
        _wait_until_idle_cpu(proc.pid)
        grown = _rss_kib(proc.pid) - base
        assert grown < 20 * 1024, f"RSS grew by {grown} KiB for answers nobody read"
        ping, read, buf = _read_until(proc, buf, lambda m: m.get("id") == "ping", 60)
        assert "result" in ping and read < 100_000
        proc.stdin.close()
        assert proc.wait(10) == 0


# ---------------------------------------------------------------- nesting
def nested(depth):
    value = "deep"
    for _ in range(depth):
        value = {"x": value}
    return value


def nested_json(depth):
    return '{"x":' * depth + '"deep"' + "}" * depth


def test_deep_nesting_is_refused_at_the_edge_and_resume_keeps_working(started, workspace):
    agent, sid = started([[{"text": "fine"}], [{"text": "fine again"}]])
    agent.send_raw(('{"jsonrpc":"2.0","id":"deep","method":"session/prompt","params":{"sessionId":'
                    f'"{sid}","prompt":[{{"type":"text","text":"hi","_meta":{nested_json(950)}}}]}}}}\n'
                    ).encode())
    error = error_of(agent.wait_for(lambda m: m.get("id") == "deep"))
    assert error["code"] == -32600 and "deeper than 64 levels" in error["message"]
    ok = {"type": "text", "text": "hi", "_meta": nested(40)}
    response, _, idle = agent.prompt(sid, "plain")
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    assert "result" in agent.request("session/prompt", {"sessionId": sid, "prompt": [ok]})
    agent.wait_for(lambda m: is_idle(m, sid))
    agent.send_raw(('{"jsonrpc":"2.0","method":"session/cancel","params":' + nested_json(200)
                    + "}\n").encode())
    assert agent.request("session/close", {"sessionId": sid})["result"] == {}
    resumed = agent.request("session/resume", {"sessionId": sid, "cwd": workspace,
                                               "replayFrom": {"type": "start"}})
    assert "result" in resumed, resumed
    agent.close()


def test_a_deeply_nested_permission_answer_denies(started, workspace, tmp_path):
    target = str(tmp_path / "o.txt")
    agent, sid = started([[{"tool_call": {"name": "create_file",
                                          "arguments": {"path": target, "content": "x"}}}],
                          [{"text": "done"}]])
    agent.prompt_async(sid, "go")
    request = agent.wait_for(is_permission, timeout=30)
    agent.send_raw((f'{{"jsonrpc":"2.0","id":{json.dumps(request["id"])},"result":'
                    '{"outcome":{"outcome":"selected","optionId":"allow-once"},"_meta":'
                    + nested_json(300) + "}}\n").encode())
    idle = agent.wait_for(lambda m: is_idle(m, sid), timeout=30)
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    assert list(statuses(agent, sid).values()) == ["failed"] and not os.path.exists(target)
    agent.close()


# ---------------------------------------------------------------- lone surrogates
def test_a_lone_surrogate_in_a_prompt_is_replaced_not_fatal(started, workspace):
    agent, sid = started([[{"text": "answered"}]])
    agent.send_raw(b'{"jsonrpc":"2.0","id":"p1","method":"session/prompt","params":{"sessionId":"'
                   + sid.encode() + b'","prompt":[{"type":"text","text":"fix \\ud800 this"}]}}\n')
    idle = agent.wait_for(lambda m: is_idle(m, sid), timeout=30)
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    titles = [m["params"]["update"]["title"] for m in agent.messages if m.get("method") == "session/update"
              and m["params"]["update"].get("title")]
    assert titles == ["fix \ufffd this"]
    listed = agent.request("session/list", {})["result"]["sessions"]
    assert listed[0]["title"] == "fix \ufffd this"
    for raw in agent.lines:
        raw.decode("utf-8")  # strict: no raw surrogate
        assert not re.search(rb"\\u[dD][89a-fA-F]", raw), raw  # nor an escaped lone one
    assert any("fix \ufffd this" in json.dumps(m, ensure_ascii=False) for m in agent.messages
               if m.get("method") == "session/update"
               and m["params"]["update"]["sessionUpdate"] == "user_message")
    agent.close()


# ---------------------------------------------------------------- live sessions
def test_live_sessions_are_capped_with_a_clear_error(spawn, workspace):
    agent = spawn(env={"TERM2ACP_MAX_LIVE_SESSIONS": "3"})
    agent.initialize()
    sids = [agent.new_session(workspace) for _ in range(3)]
    error = error_of(agent.request("session/new", {"cwd": workspace}))
    assert error["code"] == -32000 and "max_live_sessions" in error["message"]
    assert "session/close" in error["message"]
    listed = {s["sessionId"] for s in agent.request("session/list", {})["result"]["sessions"]}
    assert listed == set(sids)  # the refused session left no row
    assert agent.request("session/close", {"sessionId": sids[0]})["result"] == {}
    assert "result" in agent.request("session/new", {"cwd": workspace})
    agent.close()


def _lock_is_free(home, sid):
    fd = os.open(os.path.join(home, "locks", f"{sid}.lock"), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def _wait_lock_free(home, sid, timeout=15):
    deadline = time.monotonic() + timeout
    while not _lock_is_free(home, sid):
        assert time.monotonic() < deadline, "the idle session was never closed"
        time.sleep(0.05)


def test_idle_sessions_close_and_reopen_transparently(spawn, home, workspace, tmp_path, agent_env):
    with open(agent_env["TERM2ACP_CONFIG"], "w") as fh:
        fh.write("idle_session_timeout = 0.3\n")
    turns = [[{"tool_call": {"name": "create_file", "arguments": {
        "path": str(tmp_path / "grant" / "a.txt"), "content": "a"}}}], [{"text": "one"}],
        [{"tool_call": {"name": "create_file", "arguments": {
            "path": str(tmp_path / "grant" / "b.txt"), "content": "b"}}}], [{"text": "two"}]]
    os.makedirs(tmp_path / "grant")
    agent = spawn(script=write_script(tmp_path, turns))
    agent.initialize()
    first = agent.new_session(workspace)
    asked = []
    _, _, idle = agent.prompt(first, "one", on_request=lambda m: asked.append(m) or {
        "outcome": {"outcome": "selected", "optionId": "allow-edit-folder-session"}})
    assert idle["params"]["update"]["stopReason"] == "end_turn" and len(asked) == 1
    _wait_lock_free(home, first)  # idle-closed: its lock is released
    second = agent.new_session(workspace)
    _, updates, idle = agent.prompt(first, "two", on_request=lambda m: asked.append(m))
    assert idle["params"]["update"]["stopReason"] == "end_turn"
    assert len(asked) == 1  # reopened with its session grant: not asked again
    assert (tmp_path / "grant" / "b.txt").exists(), [u for u in updates if u["sessionUpdate"] == "tool_call_update"]
    assert (tmp_path / "grant" / "b.txt").read_text() == "b"
    assert not _lock_is_free(home, first)  # live again
    _wait_lock_free(home, first)
    assert "result" in agent.request("session/resume", {"sessionId": first, "cwd": workspace})
    _wait_lock_free(home, second)
    assert agent.request("session/close", {"sessionId": second})["result"] == {}
    error = error_of(agent.request("session/prompt", {"sessionId": second,
                                                      "prompt": [{"type": "text", "text": "x"}]}))
    assert error["code"] == -32002  # closed by the client: not reopened
    agent.close()


# ---------------------------------------------------------------- store
def test_a_failed_session_new_leaves_no_row(spawn, home, workspace):
    (home / "locks").write_text("not a directory")  # attaching the new session fails
    agent = spawn()
    agent.initialize()
    error_of(agent.request("session/new", {"cwd": workspace}))
    assert agent.request("session/list", {})["result"]["sessions"] == []
    agent.close()


@pytest.mark.parametrize("content", [b"", b"this is not a database" * 100])
def test_a_damaged_store_is_moved_aside_and_the_client_is_told(spawn, home, workspace, content):
    store = home / "sessions.sqlite3"
    store.write_bytes(content)
    agent = spawn()
    agent.initialize()
    error = error_of(agent.request("session/new", {"cwd": workspace}))
    moved = glob.glob(str(home / "sessions.sqlite3.damaged-*"))
    assert len(moved) == 1 and open(moved[0], "rb").read() == content
    assert moved[0] in error["message"] and "damaged" in error["message"]
    sid = agent.new_session(workspace)  # a fresh store from now on
    assert agent.request("session/list", {})["result"]["sessions"][0]["sessionId"] == sid
    agent.close()
    deadline = time.monotonic() + 10
    while moved[0] not in agent.stderr:  # logged on stderr (read by the harness's thread)
        assert time.monotonic() < deadline, agent.stderr
        time.sleep(0.05)
    with contextlib.closing(sqlite3.connect(store)) as db:
        assert db.execute("SELECT count(*) FROM sessions").fetchone() == (1,)
