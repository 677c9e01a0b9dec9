"""term2-acp-chat driven in a real terminal (tmux), as a person uses it: the diff is on
screen before the question, Up after answering ``1`` recalls the prompt (not the answer),
the plan is shown at "start the work?" and the mode switch announced, a background server
shows as running, after a crash only this run's last log lines, and a read-only HOME is
named with what to do, never a traceback."""

import os
import shlex
import shutil
import subprocess
import sys
import time

import pytest

from tests.e2e.test_chat import AGENT, CHAT
from tests.support.scripts import write_script

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
WAIT = 30  # seconds any one screen may take to appear


class Screen:
    """One tmux session (its own server socket) running a command; read with :meth:`wait`."""

    def __init__(self, tmp_path, command, env):
        self.socket = str(tmp_path / "tmux.sock")
        wrapper = tmp_path / "run.sh"
        exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())
        wrapper.write_text("#!/bin/sh\n" + exports + shlex.join(command) +
                           '\necho "[chat exited $?]"\nexec sleep 600\n')
        wrapper.chmod(0o700)
        self.tmux("new-session", "-d", "-s", "chat", "-x", "200", "-y", "60", str(wrapper))

    def tmux(self, *args):
        return subprocess.run(["tmux", "-S", self.socket, *args], capture_output=True,
                              text=True, timeout=10, check=True).stdout

    def text(self):
        return self.tmux("capture-pane", "-p", "-J", "-t", "chat", "-S", "-500")

    def wait(self, needle, after=None):
        """The screen once ``needle`` is on it (after the text ``after``, when given)."""
        deadline = time.monotonic() + WAIT
        while True:
            screen = self.text()
            rest = screen.split(after, 1)[-1] if after and after in screen else \
                (None if after else screen)
            if rest is not None and needle in rest:
                return screen
            assert time.monotonic() < deadline, f"{needle!r} not on screen:\n{screen}"
            time.sleep(0.05)  # polling the screen, bounded by the deadline

    def type(self, text, enter=True):
        self.tmux("send-keys", "-t", "chat", "-l", text)
        if enter:
            self.tmux("send-keys", "-t", "chat", "Enter")

    def key(self, name):
        self.tmux("send-keys", "-t", "chat", name)

    def close(self):
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True,
                       timeout=10)


@pytest.fixture
def screen(agent_env, workspace, tmp_path):
    opened = []

    def start(turns=None, env=None, agent=AGENT, extra=()):
        full = dict(agent_env, TERM=os.environ.get("TERM", "xterm"), **(env or {}))
        if turns is not None:
            full["TERM2ACP_SCRIPT"] = str(write_script(tmp_path, turns))
        command = CHAT + ["--agent", agent, "--provider", "scripted", "--cwd", workspace,
                          *extra]
        opened.append(Screen(tmp_path, command, full))
        return opened[-1]
    yield start
    for each in opened:
        each.close()


def test_the_diff_before_the_choice_and_up_recalls_the_prompt_not_the_answer(screen,
                                                                            tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "made.txt"
    chat = screen([[{"tool_call": {"name": "create_file", "arguments": {
        "path": str(target), "content": "brand new line\n"}}}], [{"text": "all done"}],
        [{"text": "again done"}]])
    chat.wait("> ")
    chat.type("please write the file")
    shown = chat.wait("choose a number")
    assert shown.index("+brand new line") < shown.index("choose a number")
    chat.type("1")
    chat.wait("all done")
    chat.wait("> ", after="all done")
    chat.key("Up")
    chat.wait("> please write the file", after="all done")
    chat.key("C-u")
    chat.type("")
    chat.wait("[chat exited 0]")
    assert target.read_text() == "brand new line\n"


def test_the_plan_at_start_the_work_and_the_mode_switch(screen):
    chat = screen([[{"text": "not played: /mode answers itself"}],
                   [{"tool_call": {"name": "finish_plan", "arguments": {
        "summary": "1. PLAN-STEP-ONE then 2. PLAN-STEP-TWO"}}}], [{"text": "working now"}]])
    chat.wait("> ")
    chat.type("/mode plan")
    chat.wait("[mode: plan]")
    chat.type("plan the work")
    shown = chat.wait("choose a number", after="plan the work")
    question = shown.split("plan the work", 1)[1]
    assert "start the work?" in question and "PLAN-STEP-ONE then 2. PLAN-STEP-TWO" in question
    assert "tool null" not in question
    chat.type("1")  # Start, auto
    chat.wait("[mode: auto]", after="PLAN-STEP-TWO")
    chat.wait("working now")


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_a_background_server_shows_as_running(screen):
    serve = f"{shlex.quote(sys.executable)} -m http.server 0 --bind 127.0.0.1"
    chat = screen([[{"tool_call": {"name": "shell", "arguments": {
        "command": serve, "background": True}}}], [{"text": "server started"}]])
    chat.wait("> ")
    chat.type("start the server")
    shown = chat.wait("server started")
    assert "[running in the background]" in shown
    assert "http.server" in shown and f"{serve[:20]}" in shown


def test_after_a_crash_only_this_runs_last_words(screen, agent_env):
    log = os.path.join(agent_env["TERM2ACP_HOME"], "chat-agent.log")
    os.makedirs(os.path.dirname(log), exist_ok=True)
    with open(log, "w") as fh:
        fh.write("EARLIER-RUN-LAST-WORDS\n")
    os.chmod(log, 0o600)
    crash = f"{shlex.quote(sys.executable)} -c " + shlex.quote(
        "import sys; sys.stderr.write('THIS-RUN-LAST-WORDS\\n'); sys.exit(3)")
    chat = screen(agent=crash)
    shown = chat.wait("[chat exited 1]")
    assert "THIS-RUN-LAST-WORDS" in shown and "EARLIER-RUN-LAST-WORDS" not in shown


def test_a_read_only_home_is_named_without_a_traceback(screen, agent_env):
    env = {"HOME": "/sys/kernel", "TERM2ACP_HOME": "", "XDG_DATA_HOME": ""}
    chat = screen(turns=[[{"text": "never"}]], env=env)
    shown = chat.wait("[chat exited 1]")
    assert "TERM2ACP_HOME" in shown and "/sys/kernel/.local/share/term2acp" in shown
    assert "Traceback" not in shown
