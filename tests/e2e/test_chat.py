"""term2-acp-chat driven as a person would: one-shot, and through a pseudo-terminal."""

import contextlib
import os
import sys

import pexpect
import pytest
from gevent import monkey

from tests.support.scripts import write_script

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHAT = [sys.executable, os.path.join(ROOT, "bin", "term2-acp-chat")]
AGENT = f"{sys.executable} {os.path.join(ROOT, 'bin', 'term2-acp')}"


def test_chat_one_shot_streams_the_answer(agent_env, workspace, tmp_path):
    import subprocess

    script = write_script(tmp_path, [[{"thought": "hm"}, {"text": "Hello from "}, {"text": "the agent"}]])
    record = tmp_path / "wire.jsonl"
    proc = subprocess.run(CHAT + ["--agent", AGENT, "--provider", "scripted", "--cwd", workspace,
                                  "--record", str(record), "say hi"],
                          env=dict(agent_env, TERM2ACP_SCRIPT=str(script)), capture_output=True,
                          timeout=30, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert "Hello from the agent" in proc.stdout.decode()
    lines = record.read_text().splitlines()
    assert lines[0].startswith("> ") and '"initialize"' in lines[0]
    assert any(line.startswith("< ") and '"idle"' in line for line in lines)


def test_chat_list_and_resume_with_replay(agent_env, workspace, tmp_path):
    import subprocess

    script = write_script(tmp_path, [[{"text": "first answer"}]])
    env = dict(agent_env, TERM2ACP_SCRIPT=str(script))
    base = CHAT + ["--agent", AGENT, "--provider", "scripted", "--cwd", workspace]
    subprocess.run(base + ["remember this"], env=env, timeout=30, check=True,
                   stdin=subprocess.DEVNULL, capture_output=True)
    listed = subprocess.run(base + ["--list"], env=env, timeout=30, capture_output=True,
                            stdin=subprocess.DEVNULL).stdout.decode()
    session_id = listed.split()[0]
    assert "remember this" in listed
    replay = subprocess.run(base + ["--resume", session_id, "--replay"], env=env, timeout=30,
                            capture_output=True, stdin=subprocess.DEVNULL).stdout.decode()
    assert "> remember this" in replay and "first answer" in replay


@contextlib.contextmanager
def synchronous_close():
    """ptyprocess waits for EOF on a pipe whose write end it closes with os.close, which
    gevent defers through the hub: give it the original os.close while it spawns."""
    patched = os.close
    os.close = monkey.get_original("os", "close")
    try:
        yield
    finally:
        os.close = patched


@pytest.fixture
def pty_chat(agent_env, workspace, tmp_path):
    children = []

    def start(turns, *extra):
        script = write_script(tmp_path, turns)
        with synchronous_close():
            child = pexpect.spawn(CHAT[0], CHAT[1:] + ["--agent", AGENT, "--provider", "scripted",
                                                   "--cwd", workspace, *extra],
                                  env=dict(agent_env, TERM2ACP_SCRIPT=str(script)), timeout=20,
                                  encoding="utf-8")
        children.append(child)
        return child
    yield start
    for child in children:
        child.close(force=True)


def test_chat_permission_prompt_at_the_terminal(pty_chat, workspace, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "made.txt"
    child = pty_chat([[{"tool_call": {"name": "create_file", "arguments": {"path": str(target), "content": "hi\n"}}}],
                      [{"text": "all done"}]])
    child.expect("> ")
    child.sendline("please write it")
    child.expect("Allow once")
    child.expect("choose a number")
    child.sendline("1")
    child.expect("all done")
    child.expect("> ")
    assert target.read_text() == "hi\n"
    child.sendline("")
    child.expect(pexpect.EOF)


def test_chat_ctrl_c_cancels_the_turn_and_keeps_the_session(pty_chat):
    child = pty_chat([[{"text": "working"}, {"hang": True}], [{"text": "second reply"}]])
    child.expect("> ")
    child.sendline("long task")
    child.expect("working")
    child.sendintr()
    child.expect(r"\[cancelled\]")
    child.expect("> ")
    child.sendline("again")
    child.expect("second reply")
    child.sendline("")
    child.expect(pexpect.EOF)


def test_chat_failure_is_said_once_and_the_agent_log_stays_out_of_the_answer(
        agent_env, workspace, tmp_path):
    import subprocess

    script = write_script(tmp_path, [[{"text": "partial "}, {"error": "the model is down"}]])
    env = dict(agent_env, TERM2ACP_SCRIPT=str(script), TERM2ACP_LOG_LEVEL="DEBUG")
    proc = subprocess.run(CHAT + ["--agent", AGENT, "--provider", "scripted", "--cwd", workspace,
                                  "hi"], env=env, capture_output=True, timeout=30,
                          stdin=subprocess.DEVNULL)
    out, err = proc.stdout.decode(), proc.stderr.decode()
    assert proc.returncode == 1
    assert (out + err).count("the model is down") == 1, (out, err)
    assert "[failed]" in out
    log = os.path.join(agent_env["TERM2ACP_HOME"], "chat-agent.log")
    assert "term2acp" in open(log).read()  # the agent's DEBUG log went to the file...
    assert "term2acp." not in out + err  # ...not into the answer
    assert f"model scripted · session " in err and workspace in err


def test_chat_daily_use_help_history_and_the_diff_with_the_question(pty_chat, workspace,
                                                                   tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "made.txt"
    child = pty_chat([[{"text": "first answer"}],
                      [{"tool_call": {"name": "create_file", "arguments": {
                          "path": str(target), "content": "brand new line\n"}}}],
                      [{"text": "all done"}]])
    child.expect("model scripted · session ")
    child.expect("> ")
    child.sendline("/help")
    child.expect("Ctrl-C cancels")
    child.expect("/compact")
    child.expect("> ")
    child.sendline("write the file")
    child.expect("first answer")
    child.expect("> ")
    child.send("\x1b[A")  # up arrow: the last prompt again, edited in place (readline)
    child.sendline("")
    child.expect(r"\+brand new line")  # the diff, shown before the question needs an answer
    child.expect("Allow once")
    child.expect("choose a number")
    child.sendline("1")
    child.expect("all done")
    assert "^[[A" not in child.before
    child.expect("> ")
    child.sendline("")
    child.expect(pexpect.EOF)
    assert target.read_text() == "brand new line\n"


def test_chat_prints_no_control_character_of_the_agent(agent_env, workspace, tmp_path):
    """What the agent sends (an answer, a title in --list) reaches the terminal with its
    control characters escaped: no window title set, no screen cleared, no line reversed."""
    import subprocess

    script = write_script(tmp_path, [[{"text": "a\x1b]0;owned\x07b \x1b[2J c \u202ed"}]])
    env = dict(agent_env, TERM2ACP_SCRIPT=str(script))
    base = CHAT + ["--agent", AGENT, "--provider", "scripted", "--cwd", workspace]
    said = subprocess.run(base + ["hi"], env=env, timeout=30, capture_output=True,
                          stdin=subprocess.DEVNULL)
    assert said.returncode == 0, said.stderr
    out = said.stdout.decode()
    assert "a\\x1b]0;owned\\x07b \\x1b[2J c \\u202ed" in out
    assert not {"\x1b", "\x07", "\u202e"} & set(out)
    listed = subprocess.run(base + ["--list"], env=env, timeout=30, capture_output=True,
                            stdin=subprocess.DEVNULL).stdout.decode()
    assert "hi" in listed and not {"\x1b", "\x07", "\u202e"} & set(listed)


INTERRUPTED_ELSEWHERE = r'''
import os, queue, signal, sys, threading, time
sys.path.insert(0, sys.argv[1])
from term2acp.client.chat import Chat
from term2acp.client.render import Renderer

class Conn:
    """Answers the prompt, then stays quiet until cancelled; its reader thread is the one
    the kernel hands the Ctrl-C to."""
    def __init__(self):
        self.inbox, self.waiting = queue.Queue(), threading.Event()
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()
    def read(self):
        self.waiting.wait()
        stat = f"/proc/self/task/{os.getpid()}/stat"
        deadline = time.monotonic() + 5
        while open(stat).read().split(") ")[1][0] != "S" and time.monotonic() < deadline:
            time.sleep(0.001)  # until the main thread sleeps in its wait for a message
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)
        threading.Event().wait()
    def request(self, method, params):
        self.inbox.put({"jsonrpc": "2.0", "id": 1, "result": {}})
        return 1
    def send(self, message):
        if message.get("method") == "session/cancel":
            self.inbox.put({"jsonrpc": "2.0", "method": "session/update", "params": {
                "sessionId": "s", "update": {"sessionUpdate": "state_update", "state": "idle",
                                             "stopReason": "cancelled"}}})
    def receive(self, timeout=None):
        if self.inbox.empty():
            self.waiting.set()
        return self.inbox.get(timeout=timeout)

chat = Chat(Conn(), Renderer(), "never")
chat.session_id = "s"
print("turn ended:", chat.turn("long task"))
'''


def test_chat_ctrl_c_taken_by_another_thread_still_cancels_while_the_agent_is_quiet():
    """The kernel may give Ctrl-C to any thread of the client (its reader, blocked on the
    agent's output): the turn is cancelled all the same, without waiting for the agent to
    say something first."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", INTERRUPTED_ELSEWHERE, ROOT],
                          capture_output=True, text=True, timeout=20)
    assert "turn ended: cancelled" in done.stdout, (done.stdout, done.stderr)
