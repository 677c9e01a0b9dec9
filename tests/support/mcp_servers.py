"""Starting the MCP servers the tests talk to: ours and ``@modelcontextprotocol/server-everything``
from npm (installed in tests/mcp by .ci/run). Each runs in its own process, never under gevent.

Ours comes in two builds with the same command line, tools and wire behaviour: by default
the stdlib-only fake (tests/support/mcp_fake.py, ~0.05 s of CPU a start), and with
``official=True`` tests/support/mcp_server.py, written with the official ``mcp`` package
(~1.5 s of CPU a start: importing mcp/pydantic/uvicorn). A few tests keep running the
official one so that the fake cannot drift from the real SDK unnoticed."""

import os
import subprocess
import sys

import logging

import gevent
from gevent.event import Event
from gevent.socket import wait_read

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SERVER = os.path.join(ROOT, "tests", "support", "mcp_server.py")  # the official SDK
FAKE = os.path.join(ROOT, "tests", "support", "mcp_fake.py")  # stdlib only, same wire
EVERYTHING = os.path.join(ROOT, "tests", "mcp", "node_modules", "@modelcontextprotocol",
                          "server-everything", "dist", "index.js")
START_TIMEOUT = 30.0


def server_script(official=False):
    return SERVER if official else FAKE


def stdio_entry(name="test", env=None, official=False):
    """An ACP-shaped stdio entry for our server (the fake unless ``official``)."""
    return {"name": name, "command": sys.executable, "args": [server_script(official), "stdio"],
            "env": [{"name": k, "value": v} for k, v in (env or {}).items()]}


def everything_entry(name="everything"):
    node = subprocess.run(["which", "node"], capture_output=True, text=True).stdout.strip()
    return {"name": name, "command": node, "args": [EVERYTHING, "stdio"], "env": []}


def everything_installed():
    return os.path.exists(EVERYTHING)


class HttpServer:
    """Our server over streamable HTTP (``mode="http"``) or legacy SSE (``mode="sse"``); the
    fake unless ``official``."""

    def __init__(self, mode, official=False, env=None):
        self.proc = subprocess.Popen([sys.executable, server_script(official), mode],
                                     stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})},
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        with gevent.Timeout(START_TIMEOUT):
            line = self.proc.stdout.readline().decode()
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"the MCP test server did not start: {line!r}")
        self.port = int(line.split()[1])
        self.url = f"http://127.0.0.1:{self.port}/" + ("mcp" if mode == "http" else "sse")

    def entry(self, name="web", headers=None):
        return {"type": "http" if self.url.endswith("/mcp") else "sse", "name": name,
                "url": self.url, "headers": [{"name": k, "value": v}
                                             for k, v in (headers or {}).items()]}

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc.stdout.close()


class EverythingHttp:
    """server-everything in its streamable HTTP mode, on a port that was free a moment ago."""

    def __init__(self):
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        node = subprocess.run(["which", "node"], capture_output=True, text=True).stdout.strip()
        self.proc = subprocess.Popen([node, EVERYTHING, "streamableHttp"], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     env=dict(os.environ, PORT=str(port)), start_new_session=True)
        seen = []
        with gevent.Timeout(START_TIMEOUT, False):
            for line in self.proc.stderr:
                seen.append(line.decode(errors="replace"))
                if b"listening on port" in line:
                    break
        if not seen or "listening on port" not in seen[-1]:
            self.stop()
            raise RuntimeError(f"server-everything did not start: {''.join(seen)[-500:]}")
        self.url = f"http://127.0.0.1:{port}/mcp"

    def entry(self, name="everything"):
        return {"type": "http", "name": name, "url": self.url, "headers": []}

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc.stderr.close()


def alive(pid):
    """True while ``pid`` runs (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pid, timeout=5.0):
    """Wait (bounded, no polling) until ``pid`` has exited; True when it has."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        if not alive(pid):
            return True
        try:
            wait_read(fd, timeout=timeout, timeout_exc=TimeoutError)
        except TimeoutError:
            return False
        return True
    finally:
        os.close(fd)


class LogWaiter(logging.Handler):
    """Set an event when a record containing ``text`` is logged under ``logger``."""

    def __init__(self, logger, text):
        super().__init__(logging.DEBUG)
        self.text, self.seen = text, Event()
        self.logger = logging.getLogger(logger)

    def emit(self, record):
        if self.text in record.getMessage():
            self.seen.set()

    def __enter__(self):
        self.logger.addHandler(self)
        self._level = self.logger.level
        if not self.logger.isEnabledFor(logging.DEBUG):
            self.logger.setLevel(logging.DEBUG)
        return self

    def __exit__(self, *exc):
        self.logger.removeHandler(self)
        self.logger.setLevel(self._level)
