"""A fork server for the test kit's agents (opt-in: ``acp_fork_agents = true`` in the
pytest ini, see plugin.py).

A test suite starts hundreds of agents; each would pay for a Python interpreter and for
importing gevent and term2acp again (about 0.25 s of CPU each on a small machine, more
than most tests spend otherwise). The server is one process per test process that does
what ``bin/term2-acp`` does up to ``main()`` (put the repository on ``sys.path``, patch
gevent, import the agent) and then forks an agent per request: the child takes the
request's stdin/stdout/stderr, environment, working directory and arguments, and runs
``main()`` as the launcher would, exit status included. The agent is the same code from
the same launcher steps, minus the interpreter start and the imports. Tests that start
``bin/term2-acp`` themselves (``subprocess``, or ``AgentProcess(command=...)``) still
exercise the real start.

Protocol (a SOCK_SEQPACKET pair, one JSON message a packet): a request carries the three
descriptors (SCM_RIGHTS) and ``{"args", "env", "cwd"}``; the server answers
``{"pid": n}`` and later ``{"exited": n, "code": c}`` (``-signal`` when killed, as in
``subprocess``) once it has reaped that child. The server ends when its socket closes.
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAUNCHER = os.path.join(ROOT, "bin", "term2-acp")
MAX_PACKET = 1 << 20
# read when an interpreter starts (sys.path, stdio encoding, flags): an agent whose
# environment differs from the server's in one of them is started afresh instead
STARTUP_ENV = ("PYTHON", "LANG", "LC_ALL", "LC_CTYPE")
# what a started agent imports anyway (so the fork has them), v1 and v2 faces both
PRELOAD = ("term2acp.__main__", "term2acp.cli", "term2acp.server", "term2acp.warmup",
           "term2acp.acp.v2.handlers", "term2acp.acp.v2.routes", "term2acp.acp.v1.handlers",
           "term2acp.sessions.manager",
           "term2acp.acp.v2.translate", "term2acp.acp.v2.permissions", "term2acp.turns.commands",
           "term2acp.providers.http", "term2acp.providers.scripted",
           "term2acp.providers.openai", "term2acp.providers.anthropic",
           "term2acp.tools.registry", "term2acp.sandbox.bwrap")


def _warm_up_modules():
    """Every module the agent's warm-up imports (term2acp/warmup.py): in the fork already,
    so a forked agent's warm-up has nothing left to import."""
    from term2acp import warmup

    faces = tuple(name for names in warmup.FACE_MODULES.values() for name in names)
    return faces + warmup.TURN_LAYER + warmup.TURN_MODULES + tuple(
        warmup.PROVIDER_MODULES.values())


# ---------------------------------------------------------------- the server process
def _serve(control_fd):
    import array
    import importlib
    import json

    import _socket
    from gevent import monkey

    fork = monkey.get_original("os", "fork")
    waitpid = monkey.get_original("os", "waitpid")
    select = monkey.get_original("select", "select")
    for name in PRELOAD + _warm_up_modules():
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a broken module fails in the agent, as it would
            pass
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET, 0, control_fd)
    fd_size = array.array("i").itemsize

    def send(message):
        sock.send(json.dumps(message).encode())

    while True:
        readable, _, _ = select([sock], [], [], 0.05)
        while True:  # reap: tell every ended child's exit status
            try:
                pid, status = waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            send({"exited": pid, "code": os.waitstatus_to_exitcode(status)})
        if not readable:
            continue
        data, ancillary, _, _ = sock.recvmsg(MAX_PACKET, _socket.CMSG_SPACE(3 * fd_size))
        if not data:
            return None  # the test process is gone or done
        fds = array.array("i")
        for level, kind, payload in ancillary:
            if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
                fds.frombytes(payload[:len(payload) - len(payload) % fd_size])
        request = json.loads(data)
        pid = fork()
        if pid == 0:
            sock.close()
            return request, list(fds)
        for fd in fds:
            os.close(fd)
        send({"pid": pid})


def _become_agent(request, fds):
    """In the forked child: the request's stdio, environment, cwd and argv, then the
    launcher's ``sys.exit(main())``."""
    import gevent

    gevent.reinit()  # no-op unless an import made a hub: the child gets a fresh loop
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    sys.argv = [LAUNCHER, *request["args"]]
    from term2acp.__main__ import main

    try:
        code = main()
    except SystemExit as exc:
        code = exc.code
    except BaseException:  # noqa: BLE001 - as the interpreter would: traceback, status 1
        import traceback

        traceback.print_exc()
        code = 1
    _exit(code)


def _exit(code):
    """The interpreter's exit (wait for threads, atexit handlers, flush stdio, the status
    ``sys.exit`` would give) without tearing down every module and object the fork
    inherited: that alone cost a child 60 ms of CPU, copy-on-write faults of the heap."""
    import atexit
    import threading

    try:
        threading._shutdown()
    except Exception:  # noqa: BLE001
        pass
    atexit._run_exitfuncs()
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:
        print(code, file=sys.stderr)
        status = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status & 0xFF)


def _server_main():
    sys.path.insert(0, ROOT)  # as bin/term2-acp does
    from term2acp.patching import patch_all

    patch_all()
    child = _serve(int(sys.argv[1]))
    if child is None:
        sys.exit(0)
    _become_agent(*child)


# ---------------------------------------------------------------- the test process side
class ForkServer:
    """The client in a (gevent-patched) test process: ``spawn`` returns a Popen-like
    :class:`ForkedProcess`. Start it lazily with :func:`shared`."""

    def __init__(self):
        import json
        import socket
        import subprocess

        import gevent
        from gevent.lock import BoundedSemaphore

        self._json = json
        self._startup_env = _startup_env(os.environ)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__),
                                      str(theirs.fileno())], pass_fds=(theirs.fileno(),),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        theirs.close()
        self._sock = ours
        self._lock = BoundedSemaphore()
        self._replies = []
        self._reply = None
        self._live = {}  # pid -> ForkedProcess
        self._exited = {}  # pid -> code, for one not yet registered
        self.alive = True
        self._reader = gevent.spawn(self._read)
        self._reader._t2_allowed = True  # lives as long as the test process
        self._reader.name = "agent-fork-server"

    def _read(self):
        while True:
            try:
                data = self._sock.recv(MAX_PACKET)
            except OSError:
                data = b""
            if not data:
                break
            message = self._json.loads(data)
            if "pid" in message:
                if self._reply is not None:
                    self._reply.set(message["pid"])
            elif "exited" in message:
                process = self._live.pop(message["exited"], None)
                if process is None:
                    self._exited[message["exited"]] = message["code"]
                else:
                    process._ended(message["code"])
        self.alive = False
        if self._reply is not None:
            self._reply.set(None)
        for process in list(self._live.values()):
            process._ended(-9)  # not reaped by anyone now: treat as gone
        self._live.clear()

    def spawn(self, args, env):
        """An agent with ``args`` and ``env`` on new pipes; None when the server is gone or
        ``env`` changes what an interpreter reads when it starts (then start it afresh)."""
        if _startup_env(env) != self._startup_env:
            return None
        import array
        import socket

        from gevent.event import AsyncResult
        from gevent.fileobject import FileObject

        pipes = [os.pipe() for _ in range(3)]  # (read, write) each
        child_fds = [pipes[0][0], pipes[1][1], pipes[2][1]]
        request = self._json.dumps({"args": list(args), "env": dict(env),
                                    "cwd": os.getcwd()}).encode()
        with self._lock:
            if not self.alive:
                pid = None
            else:
                self._reply = AsyncResult()
                try:
                    self._sock.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                                    array.array("i", child_fds))])
                    pid = self._reply.get(timeout=30)
                except (OSError, Exception):  # noqa: BLE001 - fall back to a plain start
                    pid = None
                finally:
                    self._reply = None
        for fd in child_fds:
            os.close(fd)
        if pid is None:
            for fd in (pipes[0][1], pipes[1][0], pipes[2][0]):
                os.close(fd)
            return None
        process = ForkedProcess(pid, FileObject(pipes[0][1], "wb"),
                                FileObject(pipes[1][0], "rb"), FileObject(pipes[2][0], "rb"))
        if pid in self._exited:
            process._ended(self._exited.pop(pid))
        else:
            self._live[pid] = process
        return process

    def close(self):
        try:
            self._sock.close()
        except OSError:
            pass
        try:
            self.proc.wait(10)
        except Exception:  # noqa: BLE001
            self.proc.kill()
            self.proc.wait(5)
        self._reader.kill(block=False)


class ForkedProcess:
    """What :class:`~term2acp.testing.harness.AgentProcess` uses of ``subprocess.Popen``:
    ``pid``, the three pipes, ``poll``/``wait``/``returncode``, ``send_signal``/
    ``terminate``/``kill``. The exit status comes from the fork server."""

    def __init__(self, pid, stdin, stdout, stderr):
        from gevent.event import Event

        self.pid = pid
        self.args = [LAUNCHER]
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.returncode = None
        self._done = Event()

    def _ended(self, code):
        self.returncode = code
        self._done.set()

    def poll(self):
        return self.returncode

    def wait(self, timeout=None):
        import subprocess

        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def send_signal(self, sig):
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self):
        import signal

        self.send_signal(signal.SIGTERM)

    def kill(self):
        import signal

        self.send_signal(signal.SIGKILL)


def _startup_env(env):
    return {k: v for k, v in env.items() if k.startswith(STARTUP_ENV)}


_SHARED = []


def shared():
    """This process's fork server, started on first use (None when it cannot run)."""
    if not _SHARED or not _SHARED[0].alive:
        _SHARED[:] = [ForkServer()]
    return _SHARED[0]


def stop_shared():
    while _SHARED:
        _SHARED.pop().close()


if __name__ == "__main__":
    _server_main()
