"""term2acp exec through the launcher (bin/term2-acp exec, a process of its own) against the
fake OpenAI-compatible server on loopback, prices from the config file: every exit status,
the --json lines, the prompt on stdin, --session, ask mode with --allow patterns."""

import json
import os
import signal
import subprocess
import sys

import pytest

from term2acp.testing.harness import REPO_LAUNCHER
from tests.support import fake_llm as f

MODEL = "gpt-exec-test"
PRICES = f'[prices."{MODEL}"]\ninput = 2.0\noutput = 10.0\ncache_read = 0.5\n'
TIMEOUT = 60


@pytest.fixture
def server():
    srv = f.FakeLLMServer().start()
    yield srv
    srv.stop()


@pytest.fixture
def run(acp_env, acp_workspace, server, tmp_path):
    with open(acp_env["TERM2ACP_CONFIG"], "w") as fh:
        fh.write(PRICES + "[providers.openai]\nmax_retries = 0\n")
    env = dict(acp_env, OPENAI_BASE_URL=server.openai_url, OPENAI_API_KEY="sk-exec-secret-1234")

    def start(*args, stdin=None, model=MODEL, wait=True):
        command = [sys.executable, REPO_LAUNCHER, "exec", "--provider", "openai",
                   "--model", model, *args]
        proc = subprocess.Popen(command, cwd=acp_workspace, env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if not wait:
            return proc
        out, err = proc.communicate(stdin.encode() if stdin else b"", timeout=TIMEOUT)
        return proc.returncode, out.decode(), err.decode()
    return start


def lines(out):
    items = [json.loads(line) for line in out.splitlines()]  # every line is JSON
    assert items and items[-1]["type"] == "result", items[-1:]
    return items


def answer(text, finish="stop", usage=(100, 10, 20)):
    return f.openai_sse(f.oa_text(text), f.oa_finish(finish), f.oa_usage(*usage[:2],
                                                                          cached=usage[2]))


def tool(name, args, call_id="call_1"):
    return f.openai_sse(f.oa_tool(0, call_id, name, json.dumps(args)), f.oa_finish("tool_calls"),
                        f.oa_usage(50, 5))


def test_exec_json_lines_end_with_the_result_usage_and_cost(run, server):
    server.enqueue(answer("Hello there."))
    code, out, err = run("--json", "say hello")
    assert code == 0, err
    items = lines(out)
    result = items[-1]
    assert result["stopReason"] == "end_turn" and result["exitCode"] == 0
    assert result["usage"] == {"input": 100, "output": 10, "cached": 20}
    # 80 fresh input at $2, 20 cached at $0.5, 10 output at $10 per million tokens
    assert result["costUsd"] == pytest.approx((80 * 2 + 20 * 0.5 + 10 * 10) / 1e6)
    assert result["modelRequests"] == 1 and result["durationMs"] > 0
    assert result["sessionId"] and all(i.get("sessionId") == result["sessionId"] for i in items)
    updates = [i["update"] for i in items[:-1]]
    text = "".join(u["content"]["text"] for u in updates
                   if u["sessionUpdate"] == "agent_message_chunk")
    assert text == "Hello there."
    assert updates[-1]["sessionUpdate"] == "state_update" and updates[-1]["state"] == "idle"
    assert "sk-exec-secret-1234" not in out + err


def test_exec_plain_answer_on_stdout_prompt_from_stdin(run, server):
    server.enqueue(answer("From stdin, fine."))
    code, out, err = run(stdin="what did I pipe?\n")
    assert (code, out) == (0, "From stdin, fine.\n"), err
    body = server.requests[-1].json
    assert body["messages"][-1]["content"].startswith("what did I pipe?")


@pytest.mark.parametrize("finish, reason, status", [("content_filter", "refusal", 3),
                                                     ("length", "max_tokens", 4)])
def test_exec_model_stops_have_their_own_exit_status(run, server, finish, reason, status):
    server.enqueue(answer("partial", finish=finish))
    code, out, err = run("--json", "go")
    assert code == status, err
    assert lines(out)[-1]["stopReason"] == reason


def test_exec_max_turns_stops_after_n_model_requests(run, server):
    server.enqueue(tool("glob", {"pattern": "*"}))
    code, out, err = run("--json", "--max-turns", "1", "list files")
    assert code == 5, err
    result = lines(out)[-1]
    assert (result["stopReason"], result["modelRequests"]) == ("max_turn_requests", 1)
    assert len([r for r in server.requests if not f.is_title_request(r)]) == 1


def test_exec_max_cost_asks_the_model_no_more_once_passed(run, server):
    server.enqueue(tool("glob", {"pattern": "*"}, "call_1"), tool("glob", {"pattern": "*"}, "c2"))
    code, out, err = run("--json", "--max-cost", "0.0001", "list files")
    assert code == 6, err
    result = lines(out)[-1]
    assert result["stopReason"] == "max_cost" and result["modelRequests"] == 1
    assert result["costUsd"] > 0.0001


def test_exec_max_cost_refused_for_a_model_without_a_price(run):
    code, out, err = run("--max-cost", "1", "hi", model="gpt-unpriced")
    assert code == 2 and out == ""
    assert "no price" in err


def test_exec_provider_error_is_an_error_result(run, server):
    server.enqueue(f.Status(500, {"error": {"message": "upstream exploded"}}))
    code, out, err = run("--json", "go")
    assert code == 1, err
    result = lines(out)[-1]
    assert result["stopReason"] == "error" and "500" in result["error"]


@pytest.mark.parametrize("args", [["--max-turns", "0", "x"], ["--allow", ":x", "x"],
                                  ["--mode", "yolo", "x"], ["--bogus", "x"], []])
def test_exec_bad_usage_exits_2(run, args):
    code, out, err = run(*args)
    assert code == 2 and out == "" and "term2acp exec:" in err


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_exec_signal_mid_answer_cancels_and_prints_the_result(run, server, signum):
    held = f.openai_sse(f.oa_text("Starting"), f.oa_text(" more"), f.oa_finish("stop"),
                        hold_after=1)
    server.enqueue(held)
    proc = run("--json", "write a long story", wait=False)
    try:
        seen = []
        for line in proc.stdout:  # bounded by the held stream's own limit
            seen.append(json.loads(line))
            update = seen[-1].get("update") or {}
            if update.get("sessionUpdate") == "agent_message_chunk":
                proc.send_signal(signum)
                break
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        held.release()
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 130, err
    result = lines(out)[-1]
    assert result["stopReason"] == "cancelled" and result["exitCode"] == 130


def test_exec_session_continues_a_stored_session(run, server):
    server.enqueue(answer("First answer."), answer("Second answer."))
    code, out, _ = run("--json", "remember the word ostrich")
    sid = lines(out)[-1]["sessionId"]
    code, out, err = run("--json", "--session", sid, "what was the word?")
    assert code == 0, err
    assert lines(out)[-1]["sessionId"] == sid
    body = [r for r in server.requests if not f.is_title_request(r)][-1].json
    said = json.dumps(body["messages"])
    assert "ostrich" in said and "First answer." in said


def test_exec_unknown_session_is_an_error(run):
    code, out, err = run("--session", "no-such-session", "hi")
    assert code == 1 and "no-such-session" in err


def test_exec_ask_mode_answers_with_allow_patterns_fail_closed(run, server, acp_workspace):
    for name in ("keep.py", "notes.txt"):
        with open(os.path.join(acp_workspace, name), "w") as fh:
            fh.write("old\n")
    edit = {"edits": [{"old_text": "old", "new_text": "new"}]}
    server.enqueue(tool("edit_file", dict(edit, path="notes.txt"), "c1"),
                   tool("edit_file", dict(edit, path="keep.py"), "c2"),
                   answer("Edited what I was allowed to."))
    code, out, err = run("--json", "--mode", "ask", "--allow", "shell:pytest*",
                         "--allow", "edit_file:*.txt", "edit both")
    assert code == 0, err
    decisions = [i for i in lines(out) if i.get("type") == "permission"]
    assert [(d["kind"], d["rule"]) for d in decisions] == [
        ("allow_once", "edit_file:*.txt"),
        ("reject_once", "no --allow pattern matched: refused")]
    assert all(d["options"] and d["question"] for d in decisions)
    with open(os.path.join(acp_workspace, "notes.txt")) as fh:
        assert fh.read() == "new\n"
    with open(os.path.join(acp_workspace, "keep.py")) as fh:
        assert fh.read() == "old\n"


def test_exec_session_takes_over_a_session_open_in_an_editor(acp_agent, acp_env, acp_workspace,
                                                             tmp_path):
    script = tmp_path / "takeover.json"
    script.write_text(json.dumps({"turns": [[{"text": "In the editor."}],
                                            [{"text": "Now from exec."}]]}))
    editor = acp_agent(script=script)  # served in this process: it holds the session
    sid = editor.new_session(acp_workspace)
    editor.prompt(sid, "hello from the editor")
    proc = subprocess.run([sys.executable, REPO_LAUNCHER, "exec", "--provider", "scripted",
                           "--session", sid, "and now?"], cwd=acp_workspace,
                          env=dict(acp_env, TERM2ACP_SCRIPT=str(script)),
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert (proc.returncode, proc.stdout) == (0, "Now from exec.\n"), proc.stderr


def test_exec_lets_an_editor_take_its_session_over(acp_agent, acp_env, acp_workspace, tmp_path):
    script = tmp_path / "hang.json"
    script.write_text(json.dumps({"turns": [[{"text": "working"}, {"hang": True}]]}))
    proc = subprocess.Popen([sys.executable, REPO_LAUNCHER, "exec", "--provider", "scripted",
                             "--json", "work forever"], cwd=acp_workspace,
                            env=dict(acp_env, TERM2ACP_SCRIPT=str(script)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        for line in proc.stdout:
            item = json.loads(line)
            if (item.get("update") or {}).get("sessionUpdate") == "agent_message_chunk":
                break
        editor = acp_agent(script=script)
        answer = editor.request("session/resume", {"sessionId": item["sessionId"],
                                                   "cwd": acp_workspace})
        assert "result" in answer, answer
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 130, err
    assert lines(out.decode())[-1]["stopReason"] == "cancelled"


def test_exec_is_a_command_of_both_console_scripts(acp_env):
    import configparser

    config = configparser.ConfigParser()
    config.read(os.path.join(os.path.dirname(os.path.dirname(REPO_LAUNCHER)), "setup.cfg"))
    scripts = config["options.entry_points"]["console_scripts"]
    assert "term2acp = term2acp.__main__:main" in scripts
    assert "term2-acp = term2acp.__main__:main" in scripts
    env = dict(acp_env, PYTHONPATH=os.path.dirname(os.path.dirname(REPO_LAUNCHER)))
    for command in (["exec", "--help"], ["sessions", "--help"]):
        proc = subprocess.run([sys.executable, "-m", "term2acp", *command], env=env,
                              capture_output=True, text=True, timeout=TIMEOUT)
        assert proc.returncode == 0 and f"term2acp {command[0]}" in proc.stdout
