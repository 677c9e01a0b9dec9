"""Count how many Python calls a flow makes inside ``term2acp`` (used by ``bench/flows``).

:class:`CallCounter` is a ``sys.setprofile`` function that counts the ``call`` events of
frames whose code lives in the ``term2acp`` package (a generator's resume is tallied
apart: it is not a new call). It covers every greenlet of the thread: greenlet keeps the
profile across switches (it carries the interpreter's tracing state from the greenlet it
leaves to the one it enters), and a ``greenlet.settrace`` hook sets the profile again on
every switch, so a greenlet version that did not carry it would still be covered. It
also covers the native threads that exist when it is installed (a store thread, the
preload's thread pool): ``sys._setprofileallthreads`` from Python 3.12, before that the
C API (``_PyEval_SetProfile`` on each thread state, ctypes). A native thread started
while a window is open is not covered. :func:`check_coverage` proves all of this on the
running interpreter.

:class:`FlowAgent` runs the real agent in this process: ``term2acp.server.Server`` (the
composition root: endpoint, writer, ACP face, session manager, turns, real tools) reads a
pipe and writes a pipe, and a small client written here (no ``term2acp`` code, so it is
never counted) plays the editor: it answers ``session/request_permission`` with the
"allow once" option the agent offered.

A window is bounded by what crosses the wire, not by internals that are being refactored:

* it starts when the client writes the request line (nothing of ours runs between that
  write and the server reading it: the server is settled first), or when a provider's
  stream yields a ``ToolCall`` (``providers/base.py``: the model's side of the boundary);
* it ends inside the ``os.write`` that puts the awaited line on the wire: every
  ``os.write`` return drains the client's pipe at once, so the stop does not depend on
  when the client's greenlet would have been woken.

What would make counts vary from run to run is held still while a window is open: the
garbage collector is off (after a collection), the switch interval is long (gevent's
loop stops running callbacks for I/O after one switch interval: with profiling on that is
reached at random), timers of 50 ms or more armed with ``gevent.spawn_later`` (e.g. the
idle-session timer) start once the window has closed, as they would at full speed.
"""

import ctypes
import errno
import fcntl
import gc
import json
import os
import re
import sys
from collections import Counter

import gevent
import gevent.os
import greenlet
from gevent import monkey
from gevent.event import AsyncResult
from gevent.queue import Queue
from gevent.socket import wait_read

import term2acp

PACKAGE_DIR = os.path.dirname(os.path.abspath(term2acp.__file__)) + os.sep
GENERATOR_FLAGS = 0x20 | 0x80 | 0x200  # CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR
OS_WRITE = os.write
WALL_CLOCK_TIMER = 0.05  # seconds: spawn_later timers this long start after the window
PIPE_SIZE = 1 << 20
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
WAIT = 30.0  # seconds any single wait of the client may take
get_ident = monkey.get_original("_thread", "get_ident")  # the native thread's, not a greenlet's
MAIN_THREAD = get_ident()
# gevent's os.close defers the close to a loop "check" watcher, which runs only once the
# loop iterates: the agent would wait for an EOF that a quiet loop never delivers. These
# pipes have no watcher when they are closed, so they close at once.
close_fd = monkey.get_original("os", "close")
VARYING = re.compile(r"[0-9a-f]{8}-[0-9a-f-]{27}|\d+")  # session ids, request ids, counters


# ---------------------------------------------------------------- counting
def _interval_wanted(saved):
    """The switch interval to restore as a window closes: what ``core/pacing`` holds now
    (a store job or the preload may have started or ended while the window was open), or
    the one saved when it opened. Restoring the saved one blindly could leave a store
    job's 0.2 ms interval in force for good (later tests in the process saw it)."""
    from term2acp.core import pacing

    if pacing._held:
        return min(pacing._base, *pacing._held)
    return pacing._base if pacing._base is not None else saved


def _module_of(filename):
    rel = os.path.relpath(filename, os.path.dirname(PACKAGE_DIR.rstrip(os.sep)))
    return rel.removesuffix(".py").replace(os.sep, ".").removesuffix(".__init__")


def _first_resume(code):
    """Offset of the instruction a generator's first entry starts at (3.11+: RESUME 0);
    -1 before 3.11, where a fresh frame has f_lasti -1."""
    import dis

    for ins in dis.get_instructions(code):
        if ins.opname == "RESUME":
            return ins.offset
    return -1


class CallCounter:
    """A profile function counting calls into ``term2acp`` while a window is open."""

    def __init__(self, on_write=None):
        self.on_write = on_write  # called after every os.write (drains the client's pipe)
        self._codes = {}  # code -> (module, qualname) of ours, or None
        self._resume_at = {}  # generator code -> offset of its first entry
        self.calls = Counter()  # (module, qualname) -> calls
        self.resumes = Counter()  # (module, qualname) -> generator resumes
        self.greenlets = Counter()  # name of the greenlet -> calls
        self.others = 0  # Python calls (and resumes) outside term2acp: information only
        self.lines = 0  # lines the agent wrote while the window was open (set by the client)
        self.active = False
        self.start_on = None  # callable(arg) -> bool: open the window at that return
        self.installed = False
        self.windows = 0
        self._saved = None
        self._deferred = []
        self._previous_trace = None

    # ------------------------------------------------------------ the profile function
    def profile(self, frame, event, arg):
        if event == "call":
            if not self.active:
                return
            code = frame.f_code
            try:
                key = self._codes[code]
            except KeyError:
                key = self._classify(code)
            if key is None:
                self.others += 1
                return
            if code.co_flags & GENERATOR_FLAGS:
                first = self._resume_at.get(code)
                if first is None:
                    first = self._resume_at[code] = _first_resume(code)
                if frame.f_lasti > first:
                    self.resumes[key] += 1
                    return
            self.calls[key] += 1
            self.greenlets[_greenlet_name()] += 1
        elif event == "c_return":
            if arg is OS_WRITE and self.on_write is not None and get_ident() == MAIN_THREAD:
                self.on_write()
        elif (event == "return" and self.start_on is not None and arg is not None
              and frame.f_code.co_filename.startswith(PACKAGE_DIR) and self.start_on(arg)
              and get_ident() == MAIN_THREAD):
            self.start_on = None
            self.open()

    def _classify(self, code):
        filename = code.co_filename
        key = None
        if filename.startswith(PACKAGE_DIR):
            key = (_module_of(filename), getattr(code, "co_qualname", code.co_name))
        self._codes[code] = key
        return key

    def _switched(self, event, args):
        if self.installed:
            sys.setprofile(self.profile)
        if self._previous_trace is not None:
            self._previous_trace(event, args)

    # ------------------------------------------------------------ install, windows
    def install(self):
        """Profile every greenlet of this thread and every native thread (not counting
        until a window opens)."""
        self.installed = True
        self._previous_trace = greenlet.settrace(self._switched)
        set_profile_all_threads(self.profile)

    def uninstall(self):
        self.installed = False
        set_profile_all_threads(None)
        greenlet.settrace(self._previous_trace)
        self._previous_trace = None

    def reset(self):
        self.calls.clear()
        self.resumes.clear()
        self.greenlets.clear()
        self.others = 0
        self.lines = 0

    def open(self):
        """Open the window now (called from the test, or from the profile function)."""
        if self.active:
            return
        self._saved = (gc.isenabled(), sys.getswitchinterval(), gevent.spawn_later)
        gc.disable()
        sys.setswitchinterval(1000.0)
        gevent.spawn_later = self._spawn_later
        self.windows += 1
        self.active = True

    def close(self):
        """Close the window (from the profile function, inside the write that ends it)."""
        if not self.active:
            return
        self.active = False
        enabled, interval, spawn_later = self._saved
        gevent.spawn_later = spawn_later
        sys.setswitchinterval(_interval_wanted(interval))
        if enabled:
            gc.enable()
        # timers held while the window was open start now, as late as they were asked
        for seconds, glet in self._deferred:
            if not glet.dead and not glet.started:
                glet.start_later(seconds)
        self._deferred = []

    def _spawn_later(self, seconds, function, *args, **kwargs):
        if seconds < WALL_CLOCK_TIMER:
            return self._saved[2](seconds, function, *args, **kwargs)
        glet = gevent.Greenlet(function, *args, **kwargs)
        self._deferred.append((seconds, glet))
        return glet

    # ------------------------------------------------------------ results
    @property
    def total(self):
        return sum(self.calls.values())

    def per_module(self):
        modules = Counter()
        for (module, _name), count in self.calls.items():
            modules[module] += count
        return modules

    def report(self, title, top=int(os.environ.get("FLOW_TOP", 15))):
        lines = [(f"== {title}: {self.total} calls, {len(self.calls)} distinct functions, "
                  f"{sum(self.resumes.values())} generator resumes, {self.lines} lines written "
                  f"(term2acp from {PACKAGE_DIR})")]
        lines.append(f"  (and {self.others} Python calls outside term2acp: stdlib, gevent, "
                     "marshmallow, sqlite3 wrappers...; not bounded)")
        lines.append("  calls per module:")
        for module, count in sorted(self.per_module().items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"    {count:6d}  {module}")
        lines.append(f"  top {top} functions:")
        ranked = sorted(self.calls.items(), key=lambda kv: (-kv[1], kv[0]))
        for (module, name), count in ranked[:top]:
            lines.append(f"    {count:6d}  {module}:{name}")
        lines.append("  calls per greenlet: " + ", ".join(
            f"{name} {count}" for name, count in self.greenlets.most_common()))
        return "\n".join(lines)

    def snapshot(self):
        return {"total": self.total, "distinct": len(self.calls), "lines": self.lines,
                "modules": dict(self.per_module()), "calls": dict(self.calls)}


def _greenlet_name():
    """A greenlet's name without the ids and numbers that change from run to run."""
    if get_ident() != MAIN_THREAD:
        return "native thread"  # (gevent.get_hub() here would make a hub for it)
    current = greenlet.getcurrent()
    if current is gevent.get_hub():
        return "hub"
    name = getattr(current, "name", None) or type(current).__name__
    return VARYING.sub("*", name)


def set_profile_all_threads(function):
    """``sys.setprofile(function)`` in this thread and in every other native thread."""
    if hasattr(sys, "_setprofileallthreads"):  # Python 3.12+
        sys._setprofileallthreads(function)
        return
    sys.setprofile(function)
    api = _c_api()
    current = api.PyThreadState_Get()
    trampoline = None
    if function is not None:
        # The C function behind every Python-level profile function is not exported: take
        # it from this thread's state, next to the profile object just set (3.11 layout:
        # c_profilefunc, c_tracefunc, c_profileobj).
        words = (ctypes.c_void_p * 64).from_address(current)
        found = [i for i in range(3, 64) if words[i] == id(function)]
        assert found, "cannot find the profile function in the thread state"
        trampoline = words[found[0] - 2]
    state = api.PyInterpreterState_ThreadHead(api.PyInterpreterState_Get())
    while state:
        if state != current:
            api._PyEval_SetProfile(state, trampoline, None if function is None else id(function))
        state = api.PyThreadState_Next(state)


_API = []


def _c_api():
    if not _API:
        api = ctypes.pythonapi
        pointer = ctypes.c_void_p
        for name, restype, argtypes in (
                ("PyThreadState_Get", pointer, []),
                ("PyInterpreterState_Get", pointer, []),
                ("PyInterpreterState_ThreadHead", pointer, [pointer]),
                ("PyThreadState_Next", pointer, [pointer]),
                ("_PyEval_SetProfile", ctypes.c_int, [pointer, pointer, pointer])):
            function = getattr(api, name)
            function.restype, function.argtypes = restype, argtypes
        _API.append(api)
    return _API[0]


def check_coverage():
    """Calls in a greenlet started before the profile, in a new one, in a hub callback
    and in a native thread that was waiting are all seen (False otherwise)."""
    seen = set()

    def probe(tag):
        seen.add(tag)

    def profile(frame, event, arg):
        if event == "call" and frame.f_code is probe.__code__:
            seen.add(("profiled", frame.f_locals.get("tag")))

    def later():
        gevent.sleep(0)
        probe("old")

    lock = monkey.get_original("_thread", "allocate_lock")()
    done = monkey.get_original("_thread", "allocate_lock")()
    lock.acquire()
    done.acquire()

    def native():
        with lock:
            probe("thread")
        done.release()

    monkey.get_original("_thread", "start_new_thread")(native, ())
    old = gevent.spawn(later)
    gevent.sleep(0)  # it runs up to its sleep, before the profile is set
    counter = CallCounter()
    counter.profile = profile
    counter.install()
    try:
        new = gevent.spawn(probe, "new")
        gevent.get_hub().loop.run_callback(probe, "hub")
        gevent.joinall([old, new])
        gevent.sleep(0.001)
        lock.release()
        with gevent.Timeout(WAIT):
            while not done.acquire(False):
                gevent.sleep(0.001)
    finally:
        counter.uninstall()
    return {("profiled", tag) for tag in ("old", "new", "hub", "thread")} <= seen


# ---------------------------------------------------------------- the agent in process
def _pipe():
    read_fd, write_fd = os.pipe()
    try:
        fcntl.fcntl(write_fd, F_SETPIPE_SZ, PIPE_SIZE)  # the writer never waits for us
    except OSError:
        pass
    return read_fd, write_fd


def _nonblocking(fd):
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)


class FlowAgent:
    """``term2acp.server.Server`` over two pipes, and the editor's side of them."""

    def __init__(self, tmp_path, turns):
        self.tmp = tmp_path
        self.workspace = os.path.realpath(tmp_path / "work")
        os.makedirs(self.workspace)
        script = tmp_path / "script.json"
        script.write_text(json.dumps({"turns": turns}))
        home = tmp_path / "home"
        home.mkdir()
        config = tmp_path / "config.toml"  # absent: the built-in defaults (mode auto)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("OPENAI_", "ANTHROPIC_", "TERM2ACP_"))}
        env.update(TERM2ACP_HOME=str(home), TERM2ACP_CONFIG=str(config),
                   XDG_CONFIG_HOME=str(tmp_path / "xdg-config"), TERM2ACP_SCRIPT=str(script))
        self.env = env
        self.counter = CallCounter(on_write=self._pump)
        self.messages = []
        self._buffer = b""
        self._eof = False
        self._ids = 0
        self._pending = {}  # request id -> AsyncResult
        self._waiters = []  # (predicate, AsyncResult)
        self._stop_on = None  # predicate on a message: close the counter's window
        self._requests = Queue()  # requests from the agent, answered by _answer
        self.server = None
        self._greenlets = []
        self._signal_watchers = []

    # ------------------------------------------------------------ start, stop
    def start(self):
        from term2acp.providers.catalog import Catalog
        from term2acp.server import Server
        from term2acp.settings import Settings

        settings = Settings.load({"provider": "scripted"}, env=self.env)
        catalog = Catalog(settings)
        settings.provider, settings.model = catalog.resolve(settings.provider, settings.model)
        self._server_in, self._to_server = _pipe()
        self._from_server, self._server_out = _pipe()
        _nonblocking(self._from_server)
        _nonblocking(self._to_server)
        self.server = Server(settings, catalog, self._server_in, self._server_out)
        real = gevent.signal_handler

        def signal_handler(signum, handler, *args):  # not the test process's signals
            watcher = real(signum, handler, *args)
            self._signal_watchers.append(watcher)
            return watcher

        gevent.signal_handler = signal_handler
        try:
            runner = gevent.spawn(self.server.run)
            gevent.sleep(0)  # run() installs its handlers and spawns its reader
        finally:
            gevent.signal_handler = real
        for watcher in self._signal_watchers:
            watcher.cancel()
        self._greenlets = [runner, gevent.spawn(self._read), gevent.spawn(self._answer)]
        return self

    def close(self):
        """EOF on the agent's stdin: it shuts down by itself (bounded), then the pipes close."""
        if self.counter.installed:
            self.counter.uninstall()
        self.counter.close()
        close_fd(self._to_server)
        runner = self._greenlets[0]
        runner.join(WAIT)
        if not runner.dead:
            from gevent import util

            stacks = "\n".join(util.format_run_info())
            for glet in self._greenlets:
                glet.kill(block=False)
            raise AssertionError(f"the agent did not shut down within {WAIT}s:\n{stacks}")
        assert runner.value == 0, f"the agent exited with {runner.value!r}"
        close_fd(self._server_out)  # the client's reader sees EOF
        self._requests.put(None)
        gevent.joinall(self._greenlets, timeout=WAIT)
        for fd in (self._server_in, self._from_server):
            try:
                close_fd(fd)
            except OSError:
                pass

    # ------------------------------------------------------------ the editor's side
    def _read(self):
        while not self._eof:
            wait_read(self._from_server)
            self._pump()

    def _pump(self):
        """Take whatever the agent has written (never blocks); also called by the profile
        function right after each os.write, so a window ends inside that write."""
        while True:
            try:
                data = os.read(self._from_server, PIPE_SIZE)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EBADF:
                    data = b""
                else:
                    raise
            if not data:
                self._eof = True
                break
            self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            if line.strip():
                self._received(json.loads(line))

    def _received(self, message):
        self.messages.append(message)
        if self.counter.active:
            self.counter.lines += 1
        if self._stop_on is not None and self._stop_on(message):
            self._stop_on = None
            self.counter.close()
        if "method" in message and "id" in message:
            self._requests.put(message)
        elif "method" not in message and message.get("id") in self._pending:
            self._pending.pop(message["id"]).set(message)
        for waiter in list(self._waiters):
            if waiter[0](message):
                self._waiters.remove(waiter)
                waiter[1].set(message)

    def _answer(self):
        for request in self._requests:
            if request is None:
                return
            if request["method"] == "session/request_permission":
                options = request["params"]["options"]
                choice = next(o["optionId"] for o in options if o["kind"] == "allow_once")
                result = {"outcome": {"outcome": "selected", "optionId": choice}}
                self._send({"jsonrpc": "2.0", "id": request["id"], "result": result})
            else:
                self._send({"jsonrpc": "2.0", "id": request["id"],
                            "error": {"code": -32601, "message": "not in this test"}})

    def _send(self, message):
        data = memoryview(json.dumps(message).encode() + b"\n")
        while data:
            data = data[gevent.os.nb_write(self._to_server, data):]

    def send_request(self, method, params):
        self._ids += 1
        result = self._pending[self._ids] = AsyncResult()
        self._send({"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params})
        return result

    def request(self, method, params):
        message = self.send_request(method, params).get(timeout=WAIT)
        assert "error" not in message, message
        return message["result"]

    def expect(self, predicate):
        """An AsyncResult set with the first message from now on that matches."""
        result = AsyncResult()
        self._waiters.append((predicate, result))
        return result

    # ------------------------------------------------------------ protocol steps
    def initialize(self):
        return self.request("initialize", {"protocolVersion": 2,
                                           "info": {"name": "flow-lengths", "version": "1"}})

    def new_session(self):
        return self.request("session/new", {"cwd": self.workspace})["sessionId"]

    def close_session(self, session_id):
        return self.request("session/close", {"sessionId": session_id})

    def prompt(self, session_id, text):
        """Send a prompt; the AsyncResult is set with the session's idle state update."""
        idle = self.expect(lambda m: is_idle(m, session_id))
        self.send_request("session/prompt", {"sessionId": session_id,
                                             "prompt": [{"type": "text", "text": text}]})
        return idle

    def settle(self, quiet=0.3, limit=WAIT):
        """Wait until nothing of ours runs: the preload (its thread, then the sandbox
        probe; the warm-up of older checkouts) has ended and no term2acp call happened for
        ``quiet`` seconds (this covers the store's commit timer)."""
        preload = getattr(self.server, "preload", None) or getattr(self.server, "warmup", None)
        glet = getattr(preload, "greenlet", None)
        if glet is not None:
            glet.join(limit)
        probe = CallCounter()
        probe.install()
        probe.active = True
        try:
            with gevent.Timeout(limit, AssertionError("the agent never went quiet")):
                while True:
                    before = probe.total
                    gevent.sleep(quiet)
                    if probe.total == before:
                        break
        finally:
            probe.active = False
            probe.uninstall()
        gc.collect()

    # ------------------------------------------------------------ measured flows
    def measure_prompt(self, session_id, text):
        """Calls from the session/prompt line to the write of the idle state update."""
        self.settle()
        counter = self.counter
        counter.reset()
        self._stop_on = lambda m: is_idle(m, session_id)
        counter.install()
        try:
            counter.open()
            idle = self.prompt(session_id, text)
            message = idle.get(timeout=WAIT)
        finally:
            counter.uninstall()
            counter.close()
        assert counter.windows and self._stop_on is None, "the window did not close"
        return message

    def measure_tool_call(self, session_id, text):
        """Calls from the provider yielding a tool call to the write of that call's
        ``completed`` update; returns the idle update of the prompt."""
        self.settle()
        counter = self.counter
        counter.reset()
        opened = counter.windows
        self._stop_on = lambda m: is_completed_tool_call(m, session_id)
        counter.start_on = lambda value: type(value).__name__ == "ToolCall" and \
            type(value).__module__.startswith("term2acp.")
        counter.install()
        try:
            idle = self.prompt(session_id, text)
            message = idle.get(timeout=WAIT)
        finally:
            counter.uninstall()
            counter.start_on = None
            counter.close()
        assert counter.windows == opened + 1, "no tool call came from the provider"
        assert self._stop_on is None, "no completed tool call update"
        return message


def _update(message, session_id):
    if message.get("method") != "session/update":
        return None
    params = message.get("params") or {}
    return params.get("update") if params.get("sessionId") == session_id else None


def is_idle(message, session_id):
    update = _update(message, session_id)
    return bool(update) and update.get("sessionUpdate") == "state_update" and \
        update.get("state") == "idle"


def is_completed_tool_call(message, session_id):
    update = _update(message, session_id)
    return bool(update) and update.get("sessionUpdate") in ("tool_call", "tool_call_update") \
        and update.get("status") == "completed"
