"""The agent an editor would spawn, served in this process over a socket pair, and the ACP v2
client's side of the connection (``exec`` is that client).

Why in this process and over the wire rather than calling the session manager: every
message exec sees is the one an editor gets (the same server, faces, translation, fail-
closed permission bridge), and nothing is started twice (no second interpreter).
"""

import json
import logging
import os
import socket

import gevent
from gevent import monkey
from gevent.event import AsyncResult

from term2acp.server import Server

log = logging.getLogger(__name__)

_close = monkey.get_original("os", "close")
INITIALIZE = {"protocolVersion": 2, "info": {"name": "term2acp-exec", "version": "1"}}


class AgentError(Exception):
    """A JSON-RPC error answer, or the agent went away."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = code


class LocalAgent:
    """``on_update(params)`` gets each ``session/update``; ``on_request(method, params)``
    answers each request of the agent (its result, or None for method not found);
    ``on_closed()`` is called when the agent's side of the connection has closed."""

    def __init__(self, settings, catalog, on_update, on_request, on_closed=None):
        self.on_update = on_update
        self.on_request = on_request
        self.on_closed = on_closed  # called once the agent's side is closed
        client_in, server_out = _pair()
        server_in, client_out = _pair()
        self._server_fds = (server_in, server_out)
        self._out = socket.socket(fileno=client_out)
        self._in = socket.socket(fileno=client_in)
        self._pending = {}
        self._next_id = 0
        self.server = Server(settings, catalog, server_in, server_out)
        self.served = gevent.spawn(self._serve)
        self.served.name = "exec-agent"
        self.reader = gevent.spawn(self._read)
        self.reader.name = "exec-client"

    def _serve(self):
        try:
            return self.server.run(signals=False)
        finally:
            reader = getattr(self.server, "reader", None)
            if reader is not None:
                reader.join(5)
            for fd in self._server_fds:
                _close(fd)

    def _read(self):
        buffered = self._in.makefile("rb")
        try:
            for line in buffered:
                try:
                    message = json.loads(line)
                except ValueError:
                    log.warning("the agent wrote a line that is not JSON: %r", line[:200])
                    continue
                self._dispatch(message)
        finally:
            buffered.close()
            for result in self._pending.values():
                result.set_exception(AgentError("the agent closed the connection"))
            self._pending.clear()
            if self.on_closed is not None:
                self.on_closed()

    def _dispatch(self, message):
        method = message.get("method")
        if method is None:
            waiting = self._pending.pop(message.get("id"), None)
            if waiting is None:
                return
            if "error" in message:
                error = message["error"] or {}
                waiting.set_exception(AgentError(error.get("message", "error"),
                                                 error.get("code")))
            else:
                waiting.set(message.get("result"))
        elif "id" in message:
            gevent.spawn(self._answer, message)
        elif method == "session/update":
            self.on_update(message.get("params") or {})

    def _answer(self, message):
        try:
            result = self.on_request(message["method"], message.get("params") or {})
        except Exception:  # noqa: BLE001 - an error answer: the agent denies (fail closed)
            log.exception("answering %s failed", message["method"])
            result = None
        if result is None:
            self._send({"jsonrpc": "2.0", "id": message["id"],
                        "error": {"code": -32601, "message": "method not found"}})
        else:
            self._send({"jsonrpc": "2.0", "id": message["id"], "result": result})

    def _send(self, message):
        self._out.sendall(json.dumps(message).encode() + b"\n")

    def notify(self, method, params):
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method, params, timeout=None):
        self._next_id += 1
        result = self._pending[self._next_id] = AsyncResult()
        self._send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        return result.get(timeout=timeout)

    def close(self, timeout=None):
        """EOF to the agent: it closes its sessions and ends (bounded by its shutdown)."""
        try:
            self._out.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        self.served.join(timeout)
        self.reader.join(5)
        self._out.close()
        self._in.close()


def _pair():
    left, right = socket.socketpair()
    os.set_inheritable(left.fileno(), False)
    return left.detach(), right.detach()
