"""The agent served inside the test process over a socket pair.

The server is the one ``bin/term2-acp`` runs (``cli.parse`` and ``cli.load`` for the
arguments and the environment, then ``Server.run``), in a greenlet of the test process:
no interpreter start, no imports, no fork per agent. :class:`ServedAgent` looks to
:class:`~term2acp.testing.harness.AgentProcess` like the ``subprocess.Popen`` it would
start (``stdin``, ``stdout`` and ``stderr``, ``poll``, ``wait``, ``returncode``), so every
message is read, validated and answered the same way.

What a process gives and this does not, hence when the harness starts a real process
instead (:func:`reason_for_process`):

* the test process must run under gevent's monkey patching (``python -m gevent.monkey
  --module pytest``): the server is cooperative code;
* the agent's environment is passed to the server as a mapping (``Settings.env``: the
  data dir, config file, provider keys and URLs, scripted provider, log level), never put
  into ``os.environ``; a few variables are still read from the process environment
  (:data:`PROCESS_ENV`: ``HOME``, ``PATH``, proxies, CA bundles, the interpreter's
  own), so an agent whose value of one of them differs from the test process's gets a
  process. So does one with a working directory of its own, or with arguments that do
  not serve (``--help``, ``--login``...);
* stdout is the socket, so "nothing but JSON on stdout" is a process test; stderr is the
  agent's log records (its greenlets' and, from native threads, every running served
  agent's), formatted as the agent would, and the tracebacks gevent prints for its
  greenlets; signals are the process's: ``kill()`` and ``send_signal()`` refuse (a test
  of a crash or a signal marks itself ``acp_process``). SIGUSR2 (a session taken over,
  ``sessions/takeover.py``) reaches every served agent, as it would reach their process.
"""

import io
import logging
import os
import signal
import subprocess
import sys

import gevent
from gevent import monkey
from gevent.event import Event
from gevent.fileobject import FileObjectPosix
from gevent.queue import Queue

# Read from the process environment by the agent (or by the interpreter as it starts):
# an agent whose value differs from the test process's runs as a process.
PROCESS_ENV = ("HOME", "PATH", "TMPDIR", "TZ", "LANG", "LC_", "PYTHON", "SSL_CERT_",
               "REQUESTS_CA_BUNDLE", "TERM2ACP_BWRAP", "TERM2ACP_LOCAL_THREADS",
               "OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "GEVENT_")
PROXIES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
# The built-in providers' key and URL come from the agent's environment (Settings.env);
# only when it has none do they look at the process's.
FALLBACK_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")
READER_EXIT = 5.0  # seconds for the server's reader to end once the server is done
OWNER = "term2acp.testing.inprocess"  # the spawn-tree local naming a greenlet's agent
# arguments a served agent takes (the rest print, ask or download, then exit)
SERVING_FLAGS = ("--provider", "--model", "--effort")

_close = monkey.get_original("os", "close")
_thread_id = monkey.get_original("_thread", "get_ident")
_live = []  # ServedAgent, running
_served = [0]  # how many were started in this process
_installed = []  # once per process: the preload, the signal relay, the exception router


def available():
    """Whether agents can be served in this process: gevent's patching is in place."""
    return all(monkey.is_module_patched(name) for name in ("socket", "threading", "os", "select"))


def reason_for_process(args=(), env=None, cwd=None):
    """Why an agent with these settings needs a process of its own, or None."""
    if not available():
        return "the test process is not patched by gevent"
    if cwd is not None:
        return "a working directory of its own"
    flags = [arg for arg in args if arg.startswith("-")]
    if any(flag not in SERVING_FLAGS for flag in flags):
        return f"arguments that do not serve: {' '.join(args)}"
    env = os.environ if env is None else env
    for key in set(env) | set(os.environ):
        if (key.startswith(PROCESS_ENV) or key.lower() in PROXIES) and \
                env.get(key) != os.environ.get(key):
            return f"{key} differs from the test process's"
    for key in FALLBACK_ENV:
        if os.environ.get(key) and not env.get(key):
            return f"{key} is set in the test process only"
    return None


class ServedAgent:
    """One agent served in this process; what AgentProcess uses of ``subprocess.Popen``."""

    def __init__(self, args, env):
        _install_once()
        self.args = list(args)
        self.env = dict(env)
        self.returncode = None
        self.server = None
        self._done = Event()
        self._stderr = _Lines()
        client_in, server_in = _pair()
        server_out, client_out = _pair()
        self._server_fds = (server_in, server_out)
        self.stdin = FileObjectPosix(client_in, "wb")
        self.stdout = FileObjectPosix(client_out, "rb")
        self.stderr = self._stderr
        self._handlers, self._level = self._log_handlers()
        _live.append(self)
        _served[0] += 1
        _apply_levels()
        self.greenlet = gevent.Greenlet(self._main)
        self.greenlet.spawn_tree_locals = {OWNER: self}  # a tree of its own: its greenlets
        self.greenlet.name = "served-agent"
        self.greenlet.start()

    # ------------------------------------------------------------ the server's side
    def _main(self):
        from term2acp.core import executables
        from term2acp.providers import compat

        noted = executables.noted_roots()  # its sessions' roots are its own (executables.py)
        compat.forget()  # what servers answered is a process's own (compat.py)
        try:
            code = self._serve()
        except BaseException as exc:  # noqa: BLE001 - as the interpreter: traceback, status 1
            import traceback

            self._stderr.write("".join(traceback.format_exception(exc)))
            code = 1
        finally:
            reader = getattr(self.server, "reader", None)
            if reader is not None:
                reader.join(READER_EXIT)  # it was told to stop: nothing may read a closed fd
            for fd in self._server_fds:
                # now, as when a process exits, so the client reads EOF (gevent's close
                # waits for the loop; nothing of the server watches them any more)
                _close(fd)
            for handler in self._handlers:
                logging.getLogger().removeHandler(handler)
                handler.close()
            _live.remove(self)
            _apply_levels()
            executables.keep_only(noted)
        self.returncode = code
        self._stderr.close()
        self._done.set()

    def _serve(self):
        from term2acp import cli
        from term2acp.server import Server

        try:
            flags = cli.parse(self.args)
            settings, catalog = cli.load(flags, self.env)
        except (cli.UsageError, cli.StartError) as exc:
            self._stderr.write(f"term2-acp: {exc}\n")
            return 1
        in_fd, out_fd = self._server_fds
        self.server = Server(settings, catalog, in_fd, out_fd)
        return self.server.run(signals=False)

    def _log_handlers(self):
        from term2acp import diagnostics

        level, handlers = diagnostics.log_handlers(self.env, self._stderr)
        for handler in handlers:
            handler.addFilter(self._mine)
            logging.getLogger().addHandler(handler)
        return handlers, level

    def _mine(self, record):
        """A record belongs to the agent whose greenlet logged it; an agent's record from
        elsewhere (a native thread: the store's, the preload's) to every running served
        agent; the test's own records to none."""
        owner = owner_of_current()
        return owner is self or (owner is None and self in _live
                                 and record.name.startswith("term2acp."))

    # ------------------------------------------------------------ Popen's face
    @property
    def pid(self):
        raise AttributeError("an in-process agent has no process id: mark the test "
                             "acp_process (or start AgentProcess(process=True))")

    def poll(self):
        return self.returncode

    def wait(self, timeout=None):
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired(["term2-acp (in process)"], timeout)
        return self.returncode

    def send_signal(self, sig):
        if self.returncode is None:
            raise RuntimeError(f"an in-process agent cannot receive signal {sig}: mark the "
                               "test acp_process (or start AgentProcess(process=True))")

    def terminate(self):
        self.send_signal(signal.SIGTERM)

    def kill(self):
        self.send_signal(signal.SIGKILL)

    def stop(self, timeout):
        """End a server whatever state it is in: EOF (its bounded shutdown), then its
        greenlet killed. True when it ended on its own."""
        try:
            self.stdin.close()
        except OSError:
            pass
        if self._done.wait(timeout):
            return True
        self.greenlet.kill(block=True, timeout=timeout)
        return False


def owner_of_current():
    """The served agent whose greenlet runs now, or None."""
    tree = getattr(gevent.getcurrent(), "spawn_tree_locals", None)
    return tree.get(OWNER) if tree else None


def live():
    """The served agents running now."""
    return list(_live)


def served():
    """How many agents were served in this process so far."""
    return _served[0]


def _pair():
    """A connected pair of socket descriptors, non-inheritable (as the agent's own)."""
    import socket as sockets

    left, right = sockets.socketpair()
    return left.detach(), right.detach()


class _Lines(io.TextIOBase):
    """The agent's stderr: written as text (log records, tracebacks; from native threads
    too, the store's), read as byte lines like a pipe, until closed."""

    def __init__(self):
        super().__init__()
        self._queue = Queue()
        self._partial = ""
        self._lock = monkey.get_original("threading", "Lock")()
        self._hub = gevent.get_hub()
        self._thread = _thread_id()

    def writable(self):
        return True

    def write(self, text):
        with self._lock:
            joined = self._partial + text
            *lines, self._partial = joined.split("\n")
        for line in lines:
            data = (line + "\n").encode("utf-8", "replace")
            if _thread_id() == self._thread:
                self._queue.put(data)
            else:  # gevent's queue belongs to the hub's thread: hand the line over to it
                self._hub.loop.run_callback_threadsafe(self._queue.put, data)
        return len(text)

    def close(self):
        if self._partial:
            self._queue.put(self._partial.encode("utf-8", "replace"))
            self._partial = ""
        self._queue.put(None)

    def __iter__(self):
        while True:
            line = self._queue.get()
            if line is None:
                self._queue.put(None)
                return
            yield line


def _apply_levels():
    """The root logger passes what the most verbose running agent asked for
    (``TERM2ACP_LOG_LEVEL``); each agent's handlers filter for their own level."""
    root = logging.getLogger()
    if not _installed:
        return
    if _live:
        root.setLevel(min(agent._level for agent in _live))
    else:
        root.setLevel(_installed[0])


def _install_once():
    """The first served agent: every agent module imported here (not by two native
    threads at once: under gevent's patching their import locks are gevent locks), the
    root level to restore, the SIGUSR2 relay and the exception router."""
    if _installed:
        return
    import importlib
    import pkgutil

    import term2acp

    for found in pkgutil.walk_packages(term2acp.__path__, "term2acp."):
        if found.name.startswith(("term2acp.testing", "term2acp.__main__")):
            continue
        try:
            importlib.import_module(found.name)
        except Exception:  # noqa: BLE001 - an optional dependency: the agent says so itself
            pass
    _installed.append(logging.getLogger().level)
    gevent.signal_handler(signal.SIGUSR2, _yield_sessions)
    gevent.get_hub().exception_stream = _ExceptionRouter()


def _yield_sessions():
    """SIGUSR2 to this process: every served agent looks for a takeover request, as its
    own process would (``Server.yield_sessions``)."""
    for agent in list(_live):
        if agent.server is not None:
            agent.server.yield_sessions()


class _ExceptionRouter:
    """gevent's report of a greenlet that failed: written to the test process's stderr
    and, for a served agent's greenlet, to that agent's stderr too."""

    def write(self, text):
        owner = owner_of_current()
        if owner is not None:
            owner._stderr.write(text)
        return sys.stderr.write(text)

    def flush(self):
        sys.stderr.flush()
