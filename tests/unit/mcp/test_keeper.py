"""The MCP keeper (mcp/keeper.py): started through sandbox/process.py with SIGTERM as its
parent-death signal, it kills the process groups it holds when the agent dies, told by
that signal even while something else still holds its pipe open, and by one that came
before it could handle it."""

import os
import signal
import subprocess
import sys

from term2acp.mcp import keeper
from tests.support.clock import within
from tests.support.mcp_servers import alive, wait_gone

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

AGENT = """
from gevent import monkey; monkey.patch_all()
import os, subprocess
from term2acp.mcp import keeper
quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}  # not our output's pipe
victim = subprocess.Popen(["sleep", "60"], start_new_session=True, **quiet)
keeper.watch(victim.pid)
held = os.dup(keeper._keeper[2])  # a process that is not the agent keeps the pipe open
os.set_inheritable(held, True)
holder = subprocess.Popen(["sleep", "60"], pass_fds=[held], start_new_session=True, **quiet)
print(victim.pid, keeper._keeper[1].pid, holder.pid, flush=True)
os.kill(os.getpid(), 9)
"""


def test_a_killed_agents_keeper_kills_the_groups_on_its_death_signal_with_its_pipe_held():
    agent = subprocess.run([sys.executable, "-c", AGENT], cwd=ROOT, capture_output=True,
                           env=dict(os.environ, PYTHONPATH=ROOT), timeout=within(60))
    assert agent.returncode == -signal.SIGKILL, agent.stderr
    victim, keeper_pid, holder = map(int, agent.stdout.split())
    try:
        assert wait_gone(victim, within(10)), "the server's group outlived the agent"
        assert wait_gone(keeper_pid, within(10)), "the keeper outlived the agent"
        assert alive(holder)  # the pipe was still open: the death signal told the keeper
    finally:
        os.kill(holder, signal.SIGKILL)


def test_the_keeper_acts_on_a_death_signal_that_came_before_its_handler():
    victim = subprocess.Popen(["sleep", "60"], start_new_session=True)
    blocked = subprocess.Popen(  # as process.start leaves it: the signal blocked until handled
        [sys.executable, "-I", "-S", keeper.__file__], stdin=subprocess.PIPE,
        preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_BLOCK, {keeper.DEATH_SIGNAL}))
    try:
        blocked.stdin.write(b"+%d\n" % victim.pid)
        blocked.stdin.flush()
        blocked.send_signal(keeper.DEATH_SIGNAL)  # long before python has started
        assert wait_gone(victim.pid, within(10))
        assert blocked.wait(within(10)) == 0
    finally:
        victim.kill()
        victim.wait()
        blocked.kill()
        blocked.stdin.close()
        blocked.wait()
