"""Drive a real agent with bounded waits: served in the test process over a socket pair
(``inprocess.py``) or started as a process over pipes (:class:`AgentProcess` decides).

Every line the agent writes must be a JSON-RPC message that validates against the schema
of the connection's ACP version (``protocol=2``, the default, or ``protocol=1``);
violations are collected in ``schema_errors`` (and fail :meth:`close`).

In v1 mode :meth:`AgentProcess.initialize` sends Zed's ``initialize`` (``ZED_V1_INITIALIZE``:
``fs`` read and write advertised), :meth:`AgentProcess.prompt` returns when the
``session/prompt`` response (``stopReason``) arrives, and the editor's side of
``fs/read_text_file`` / ``fs/write_text_file`` is played from the real disk unless an
``on_request`` callback answers them (every such request is kept in ``fs_requests``).
"""

import json
import os
import queue
import subprocess
import sys
import threading
import time

from term2acp.testing import schema

REPO_LAUNCHER = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "bin", "term2-acp")


ZED_V1_INITIALIZE = {
    "protocolVersion": 1,
    "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True},
                           "terminal": True, "auth": {"terminal": True},
                           "_meta": {"terminal_output": True, "terminal-auth": True}},
    "clientInfo": {"name": "zed", "version": "0.212.7"},
}
V2_INITIALIZE = {"protocolVersion": 2, "info": {"name": "term2acp-tests", "version": "1"}}


def initialize_with(protocol, capabilities):
    """The kit's ``initialize`` params of ``protocol`` with ``capabilities`` added (v1: to
    Zed's ``clientCapabilities``), e.g. ``{"elicitation": {"form": {}}}``."""
    if protocol == 1:
        caps = dict(ZED_V1_INITIALIZE["clientCapabilities"], **capabilities)
        return dict(ZED_V1_INITIALIZE, clientCapabilities=caps)
    return dict(V2_INITIALIZE, capabilities=dict(capabilities))
FS_METHODS = ("fs/read_text_file", "fs/write_text_file")
ANSWERED = object()  # from an on_request callback: it sent the answer itself (e.g. an error)
JOIN_TIMEOUT = 5  # seconds to wait for the pipe reader threads after the process ended


class ProtocolError(AssertionError):
    pass


def default_command():
    if os.path.exists(REPO_LAUNCHER):
        return [sys.executable, REPO_LAUNCHER]
    return [sys.executable, "-m", "term2acp"]


class AgentProcess:
    """A real agent: served in this process over a socket pair (inprocess.py) when the
    test process is patched by gevent and nothing about the agent needs a process of its
    own, else ``bin/term2-acp`` started as a process. ``process=True`` asks for a process
    (signals, a crash, stdio itself); ``process=False`` insists on serving it here."""

    def __init__(self, args=(), env=None, command=None, validate=True, protocol=2,
                 initialize_params=None, cwd=None, process=None):
        self.command = list(command or default_command()) + list(args)
        self.cwd = cwd  # the agent's working directory (given: a process of its own)
        self.args = list(args)
        self.env = dict(os.environ if env is None else env)
        self.in_process = self._serve_here(process, command)
        self.validate = validate
        self.protocol = protocol
        self.initialize_params = initialize_params or (
            ZED_V1_INITIALIZE if protocol == 1 else V2_INITIALIZE)
        self.fs_requests = []  # v1: every fs/* request the agent sent, in order
        self.proc = None
        self._threads = []
        self.messages = []  # everything received, in order
        self.lines = []  # raw stdout lines
        self.schema_errors = []
        self._queue = queue.Queue()
        self._next_id = 1000
        self._methods = {}
        self._stderr = []
        self._stderr_seen = threading.Condition()

    def _serve_here(self, process, command):
        from term2acp.testing import inprocess

        if process or command is not None:
            return False
        reason = inprocess.reason_for_process(self.args, self.env, self.cwd)
        if process is False and reason:
            raise ValueError(f"this agent cannot be served in process: {reason}")
        return reason is None

    # ------------------------------------------------------------ process
    def start(self):
        if self.in_process:
            from term2acp.testing import inprocess

            self.proc = inprocess.ServedAgent(self.args, self.env)
        else:
            self.proc = subprocess.Popen(self.command, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         env=self.env, cwd=self.cwd)
        self._threads = [threading.Thread(target=self._pump_stdout, daemon=True),
                         threading.Thread(target=self._pump_stderr, daemon=True)]
        for thread in self._threads:
            thread.start()
        return self

    def _join_pumps(self):
        """The process has ended, so its pipes reach EOF and the readers finish (bounded);
        then the pipes are closed, so no reader thread or file outlives the agent."""
        deadline = time.monotonic() + JOIN_TIMEOUT
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if any(thread.is_alive() for thread in self._threads):
            return  # a grandchild still holds the pipe; the daemon thread ends with it
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                pipe.close()
            except (OSError, ValueError):
                pass

    def _pump_stdout(self):
        for line in self.proc.stdout:
            self.lines.append(line)
            try:
                message = json.loads(line)
            except ValueError:
                self.schema_errors.append(f"non-JSON line on stdout: {line[:200]!r}")
                continue
            if self.validate:
                items = message if isinstance(message, list) else [message]
                for item in items:
                    self.schema_errors += schema.check_message(item, self._methods,
                                                               self.protocol)
            self._queue.put(message)
        self._queue.put(None)

    def _pump_stderr(self):
        for line in self.proc.stderr:
            with self._stderr_seen:
                self._stderr.append(line.decode("utf-8", "replace"))
                self._stderr_seen.notify_all()
        with self._stderr_seen:
            self._stderr_closed = True  # EOF: wake the waiters
            self._stderr_seen.notify_all()

    _stderr_closed = False

    def wait_stderr(self, predicate, timeout=10):
        """Wait (bounded) until ``predicate(stderr text)`` holds, or a string appears in it;
        the agent's stderr is read by a thread, so a line it has written may not be here
        yet when its effect on stdout is. Returns the text; raises ProtocolError on
        timeout or when stderr ended without it."""
        check = (lambda text: predicate in text) if isinstance(predicate, str) else predicate
        deadline = time.monotonic() + timeout
        with self._stderr_seen:
            while True:
                text = "".join(self._stderr)
                if check(text):
                    return text
                remaining = deadline - time.monotonic()
                if self._stderr_closed or remaining <= 0:
                    raise ProtocolError(f"stderr condition not met within {timeout}s; "
                                        f"stderr:\n{text[-2000:]}")
                self._stderr_seen.wait(remaining)

    @property
    def stderr(self):
        return "".join(self._stderr)

    def close_stdin(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def wait(self, timeout=10):
        return self.proc.wait(timeout)

    def close(self, timeout=10):
        """EOF, wait for a clean exit, and fail on any schema error seen."""
        if self.proc is None:
            return None
        self.close_stdin()
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            self._join_pumps()
            raise ProtocolError(f"agent did not exit within {timeout}s of EOF")
        self._join_pumps()
        if self.schema_errors:
            raise ProtocolError("schema errors:\n" + "\n".join(self.schema_errors[:20]))
        return code

    def dispose(self, timeout=10):
        """Make sure the agent is gone (a test's teardown, after :meth:`close` or a
        failure): a process is killed; a served agent gets EOF and its bounded shutdown,
        and fails this call if it does not end in ``timeout`` seconds."""
        if self.proc is None:
            return
        if not self.in_process:
            self.kill()
            return
        ended = self.proc.stop(timeout)
        self._join_pumps()
        if not ended:
            raise ProtocolError(f"in-process agent did not end within {timeout}s of EOF")

    def kill(self):
        """SIGKILL (a process only: a served agent refuses, see inprocess.py)."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        if self.proc:
            self._join_pumps()

    # ------------------------------------------------------------ sending
    def send_raw(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message):
        self.send_lines([message])

    def send_lines(self, messages):
        """Several messages as separate lines in one write (the agent reads them together,
        e.g. a session/prompt and its session/cancel)."""
        for message in messages:
            items = message if isinstance(message, list) else [message]
            for item in items:
                if isinstance(item, dict) and "method" in item and "id" in item:
                    self._methods[json.dumps(item["id"])] = item["method"]
        self.send_raw(b"".join(json.dumps(message).encode() + b"\n" for message in messages))

    def notify(self, method, params):
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request_async(self, method, params=None):
        self._next_id += 1
        message = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self._next_id

    def request(self, method, params=None, timeout=10, on_request=None):
        request_id = self.request_async(method, params)
        return self.wait_for(lambda m: isinstance(m, dict) and m.get("id") == request_id
                             and "method" not in m, timeout, on_request)

    # ------------------------------------------------------------ receiving
    def next_message(self, timeout=10):
        try:
            message = self._queue.get(timeout=timeout)
        except queue.Empty:
            raise ProtocolError(f"no message within {timeout}s; stderr:\n{self.stderr[-2000:]}") from None
        if message is None:
            self._queue.put(None)
            raise ProtocolError(f"agent closed stdout; stderr:\n{self.stderr[-2000:]}")
        self.messages.append(message)
        return message

    def wait_for(self, predicate, timeout=10, on_request=None):
        """Read until ``predicate(message)``; agent requests go to ``on_request``."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ProtocolError(f"condition not met within {timeout}s")
            message = self.next_message(remaining)
            if predicate(message):
                return message
            if isinstance(message, dict) and "method" in message and "id" in message:
                result = on_request(message) if on_request else None
                if result is ANSWERED:
                    continue
                if result is None and message["method"] in FS_METHODS:
                    self.fs_requests.append(message)
                    result = self._serve_file(message)
                if result is not None:
                    self.send({"jsonrpc": "2.0", "id": message["id"], "result": result})

    @staticmethod
    def _serve_file(message):
        """The editor's side of v1 ``fs/*``, played from the disk (no unsaved buffers)."""
        params = message.get("params") or {}
        if message["method"] == "fs/read_text_file":
            with open(params["path"], encoding="utf-8") as fh:
                return {"content": fh.read()}
        os.makedirs(os.path.dirname(params["path"]), exist_ok=True)
        with open(params["path"], "w", encoding="utf-8") as fh:
            fh.write(params["content"])
        return {}

    def wait_update(self, session_update=None, state=None, session_id=None, timeout=10,
                    on_request=None, **fields):
        """Read until a ``session/update`` matching every given field arrives; returns it.

        ``session_update`` is the update kind, ``state`` a state_update's state; any other
        keyword must equal that field of the update (e.g. ``stopReason="cancelled"``).
        """
        def matches(message):
            if not is_update(message, session_id):
                return False
            update = message["params"]["update"]
            if session_update is not None and update.get("sessionUpdate") != session_update:
                return False
            if state is not None and (update.get("sessionUpdate") != "state_update"
                                      or update.get("state") != state):
                return False
            return all(update.get(key) == value for key, value in fields.items())
        return self.wait_for(matches, timeout, on_request)["params"]["update"]

    def prompt_async(self, session_id, text):
        """Send a prompt without waiting for anything; returns the request id."""
        return self.request_async("session/prompt", {
            "sessionId": session_id, "prompt": [{"type": "text", "text": text}]})

    def initialize(self):
        response = self.request("initialize", self.initialize_params)
        assert "result" in response, response
        return response["result"]

    def new_session(self, cwd, mcp_servers=None):
        params = {"cwd": str(cwd)}
        if self.protocol == 1 or mcp_servers is not None:
            params["mcpServers"] = list(mcp_servers or [])  # required in v1
        response = self.request("session/new", params)
        assert "result" in response, response
        session_id = response["result"]["sessionId"]
        # Every session start is followed by its slash commands (written right after the
        # answer): take them here, so a test's next read starts with what it caused.
        self.wait_update("available_commands_update", session_id=session_id)
        return session_id

    def prompt(self, session_id, text, timeout=20, on_request=None):
        """Send a prompt; once the turn has ended return ``(response, updates, end)``.

        v2: ``end`` is the idle ``state_update`` message. v1: the turn ends with the
        prompt's response, so ``end`` is that response (``end["result"]["stopReason"]``)."""
        start = len(self.messages)
        request_id = self.request_async("session/prompt", {
            "sessionId": session_id, "prompt": [{"type": "text", "text": text}]})
        if self.protocol == 1:
            response = self.wait_for(lambda m: is_response(m, request_id), timeout, on_request)
            seen = self.messages[start:]
            return response, [m["params"]["update"] for m in seen if is_update(m, session_id)], \
                response
        idle = self.wait_for(lambda m: is_idle(m, session_id), timeout, on_request)
        seen = self.messages[start:]
        response = next((m for m in seen if m.get("id") == request_id and "method" not in m), None)
        return response, [m["params"]["update"] for m in seen if is_update(m, session_id)], idle


def is_response(message, request_id):
    return isinstance(message, dict) and message.get("id") == request_id and "method" not in message


def is_update(message, session_id=None):
    return (isinstance(message, dict) and message.get("method") == "session/update"
            and (session_id is None or message["params"]["sessionId"] == session_id))


def is_idle(message, session_id=None):
    return is_update(message, session_id) and message["params"]["update"].get("state") == "idle" \
        and message["params"]["update"].get("sessionUpdate") == "state_update"


def selected(option_id):
    """The editor's answer to ``session/request_permission`` choosing ``option_id``."""
    return {"outcome": {"outcome": "selected", "optionId": option_id}}
