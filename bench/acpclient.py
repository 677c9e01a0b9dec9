"""The benchmarks' shared ACP client: ``bin/term2-acp`` over plain pipes.

No threads: reads with ``select`` and bounded waits, splits lines without parsing them, so
the caller can count hot-path lines (message chunks) cheaply. Also the environment every
benchmark agent gets (a throw-away home, no provider keys from the caller's shell) and
small helpers (``/proc`` memory figures, sample formatting). The bench scripts import it
as ``acpclient`` (their own directory is first on ``sys.path``).
"""

import collections
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # this checkout


def repo_roots(argv):
    """The checkouts a benchmark measures: each ``--repo DIR`` given (e.g. a worktree of an
    older commit, to compare with), else this one."""
    roots = [os.path.abspath(argv[i + 1]) for i, arg in enumerate(argv[:-1]) if arg == "--repo"]
    return roots or [HERE]


ROOT = repo_roots(sys.argv)[0]  # the agent the scripts start (the first --repo)
LAUNCHER = os.path.join(ROOT, "bin", "term2-acp")
INITIALIZE = {"protocolVersion": 2, "info": {"name": "bench", "version": "1"}}


class Agent:
    """bin/term2-acp over plain pipes: no threads, reads with select, bounded waits."""

    def __init__(self, env, args=(), command=None):
        """``command``: another agent's argv (a reference agent); default bin/term2-acp."""
        self.stderr = tempfile.TemporaryFile()
        self.started = time.perf_counter()
        argv = list(command) if command else [sys.executable, LAUNCHER]
        self.proc = subprocess.Popen([*argv, *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr, env=env,
                                     bufsize=0)
        self.fd = self.proc.stdout.fileno()
        self.buf = b""
        self.lines = collections.deque()
        self.next_id = 0

    @property
    def pid(self):
        return self.proc.pid

    def send(self, message):
        self.send_many([message])

    def send_many(self, messages):
        """Several messages in one write (the agent reads them together)."""
        view = memoryview(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        while view:
            view = view[os.write(self.proc.stdin.fileno(), view):]

    def request_async(self, method, params=None):
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.next_id

    def notify(self, method, params):
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def ready(self, timeout):
        """True when a line is buffered or arrives within ``timeout`` seconds."""
        if self.lines:
            return True
        if not select.select([self.fd], [], [], max(0.0, timeout))[0]:
            return False
        self._fill()
        return bool(self.lines)

    def read_line(self, timeout=60):
        deadline = time.monotonic() + timeout
        while not self.lines:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self.fd], [], [], remaining)[0]:
                raise TimeoutError(f"agent silent for {timeout}s; stderr:\n{self.stderr_tail()}")
            self._fill()
        return self.lines.popleft()

    def _fill(self):
        chunk = os.read(self.fd, 1 << 20)
        if not chunk:
            raise EOFError(f"agent closed stdout; stderr:\n{self.stderr_tail()}")
        *complete, self.buf = (self.buf + chunk).split(b"\n")
        self.lines.extend(complete)

    def read(self, timeout=60):
        return json.loads(self.read_line(timeout))

    def request(self, method, params=None, timeout=60):
        """Send, then read until the response; returns (response, messages before it)."""
        request_id = self.request_async(method, params)
        before = []
        while True:
            message = self.read(timeout)
            if message.get("id") == request_id and "method" not in message:
                if "error" in message:
                    raise RuntimeError(f"{method} failed: {message['error']}")
                return message, before
            before.append(message)

    def initialize(self):
        self.request("initialize", INITIALIZE)
        return self

    def new_session(self, cwd):
        return self.request("session/new", {"cwd": cwd})[0]["result"]["sessionId"]

    def prompt_message(self, session_id, text="go"):
        self.next_id += 1
        return {"jsonrpc": "2.0", "id": self.next_id, "method": "session/prompt", "params": {
            "sessionId": session_id, "prompt": [{"type": "text", "text": text}]}}

    def prompt_async(self, session_id, text="go"):
        message = self.prompt_message(session_id, text)
        self.send(message)
        return message["id"]

    def stderr_tail(self):
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-3000:]

    def stderr_text(self):
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")

    def close_keep_stderr(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(15)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()

    def close(self):
        self.close_keep_stderr()
        self.stderr.close()


def agent_env(home, script=None, **extra):
    """The caller's environment without provider keys, with a throw-away home under ``home``."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "ANTHROPIC_", "TERM2ACP_"))}
    env["TERM2ACP_HOME"] = os.path.join(home, "data")
    env["TERM2ACP_CONFIG"] = os.path.join(home, "config.toml")
    env["XDG_CONFIG_HOME"] = os.path.join(home, "xdg-config")
    if script is not None:
        env["TERM2ACP_SCRIPT"] = script
    env.update(extra)
    return env


def is_idle(update):
    return update.get("sessionUpdate") == "state_update" and update.get("state") == "idle"


def proc_status(pid, field):
    """A ``/proc/<pid>/status`` memory figure (VmRSS, VmHWM) in MiB."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0  # kB -> MiB
    return float("nan")


def fmt(samples, unit="ms"):
    samples = sorted(samples)
    p90 = samples[min(len(samples) - 1, int(len(samples) * 0.9))]
    return (f"median {statistics.median(samples):7.2f} {unit}  min {samples[0]:7.2f}  "
            f"p90 {p90:7.2f}  max {samples[-1]:7.2f}  (n={len(samples)})")


def verdict(value, goal, below=True):
    ok = value <= goal if below else value >= goal
    return f"({'within' if ok else 'ABOVE'} the {goal:g} goal)"


def compile_package(root=None):
    """Byte-compile the package first, as ``pip install`` does (see bench/startup)."""
    import compileall

    compileall.compile_dir(os.path.join(root or ROOT, "term2acp"), quiet=1)
