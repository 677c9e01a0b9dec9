"""JSON-RPC 2.0 as an MCP client speaks it, over any transport.

A transport delivers every decoded message to :meth:`Connection.receive` and reports
its end with :meth:`Connection.lost`; the connection sends through ``transport.send``.
Requests wait on an ``AsyncResult`` with a timeout; a request that times out or whose
greenlet is killed (a cancelled turn) sends ``notifications/cancelled``. When the
transport is lost every pending request fails with :class:`ServerGone` carrying the
reason (the server's last words when there are any).

Messages that are not JSON-RPC are logged and dropped; they never fail a call by
themselves.
"""

import logging
import re

import gevent
from gevent.event import AsyncResult

log = logging.getLogger(__name__)

CANCEL_SEND_TIMEOUT = 2.0  # also bounds answering the server's own requests


MESSAGE_CAP = 2000  # of a server's error message, which reaches the model and the editor
# C0/C1 controls but tab and line feed, bidi and zero-width controls: a server's words
# reach the user's screen (terminal escapes, text turned around) through these messages.
_UNSHOWN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]+")


def plain(text, cap=MESSAGE_CAP):
    """A server's text for a message: control characters out, at most ``cap`` characters."""
    text = _UNSHOWN.sub(" ", text)
    return text if len(text) <= cap else text[:cap - 1] + "…"


class McpError(Exception):
    """An error answer from the server, or a failure to get one."""

    def __init__(self, message, code=None, data=None):
        super().__init__(message)
        self.code = code
        self.data = data


class ServerGone(McpError):
    """The transport ended (process exited, connection closed) before the answer."""


class TooLarge(McpError):
    """The server sent more than a bound allows (a message, a tool list): the server is
    dropped, since what it sends can no longer be trusted to fit."""


def too_large(what, limit):
    return TooLarge(f"the server sent {what} larger than {limit // (1 << 20)} MiB, the limit; "
                    "it was disconnected")


class RequestTimeout(McpError):
    """No answer within the request's timeout (the server was told to cancel)."""


class _Expired(Exception):
    """Private timeout marker so an outer gevent.Timeout is never mistaken for ours."""


class Connection:
    def __init__(self, transport, name, on_notification=None, on_request=None, spawn=None):
        self.transport = transport
        self.name = name
        self.on_notification = on_notification or (lambda method, params: None)
        # The server's own requests but ping: (method, params) -> result, or raises McpError;
        # each runs in its own greenlet (an answer may wait for the user).
        self.on_request = on_request
        self.spawn = spawn or gevent.spawn
        self._pending = {}  # id -> AsyncResult
        self._next_id = 0
        self.gone = None  # the reason, once the transport is lost

    # ------------------------------------------------------------ sending
    def request(self, method, params=None, timeout=30.0):
        """Send a request and wait for its result; raises McpError and its subclasses."""
        if self.gone is not None:
            raise ServerGone(self.gone)
        self._next_id += 1
        request_id = self._next_id
        result = self._pending[request_id] = AsyncResult()
        message = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        delivered, answered = True, False
        try:
            with gevent.Timeout(timeout, _Expired):
                try:
                    self.transport.send(message)  # HTTP: may deliver the answer before returning
                except (McpError, OSError):
                    delivered = False
                    raise
                value = result.get()
            answered = True
            return value
        except _Expired:
            raise RequestTimeout(f"{method} got no answer within {timeout:g} s") from None
        finally:
            self._pending.pop(request_id, None)
            # The spec forbids cancelling initialize; a send that failed reached nobody.
            if not answered and delivered and method != "initialize" and self.gone is None:
                self._cancel(request_id)

    def notify(self, method, params=None):
        message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.transport.send(message)

    def _cancel(self, request_id):
        """Best effort, bounded: runs while the waiting greenlet unwinds (even when killed)."""
        try:
            with gevent.Timeout(CANCEL_SEND_TIMEOUT, _Expired):
                self.notify("notifications/cancelled",
                            {"requestId": request_id, "reason": "cancelled by the client"})
        except (_Expired, McpError, OSError) as exc:
            log.debug("mcp %s: could not send cancellation: %s", self.name, exc)

    # ------------------------------------------------------------ receiving
    def receive(self, message):
        """One decoded JSON value from the transport."""
        if isinstance(message, list):  # a batch (older servers); batches do not nest
            for item in message:
                if isinstance(item, list):
                    log.warning("mcp %s: ignored a batch inside a batch", self.name)
                else:
                    self.receive(item)
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            log.warning("mcp %s: ignored a message that is not JSON-RPC 2.0", self.name)
            return
        method = message.get("method")
        if isinstance(method, str):
            if "id" in message:
                self._answer_server_request(message)
            else:
                try:
                    self.on_notification(method, message.get("params"))
                except Exception:  # noqa: BLE001 - a handler bug must not stop the reader
                    log.exception("mcp %s: notification handler failed", self.name)
            return
        if "result" in message or "error" in message:
            self._resolve(message)
        else:
            log.warning("mcp %s: ignored a JSON-RPC message without method or result", self.name)

    def _resolve(self, message):
        result = self._pending.get(message.get("id"))
        if result is None:
            log.info("mcp %s: ignored an answer to unknown request %.80r", self.name, message.get("id"))
            return
        error = message.get("error")
        if error is not None:
            if not isinstance(error, dict):
                error = {"message": str(error)}
            text = plain(str(error.get("message") or "error without a message"))
            result.set_exception(McpError(text, error.get("code"), error.get("data")))
        else:
            result.set(message.get("result"))

    def _answer_server_request(self, message):
        """ping is answered at once; the rest go to ``on_request`` in a greenlet of their
        own (without one: method not found)."""
        if message["method"] == "ping" or self.on_request is None:
            self._reply(message, self._local_answer(message))
        else:
            self.spawn(self._serve, message)

    @staticmethod
    def _local_answer(message):
        if message["method"] == "ping":
            return {"result": {}}
        return {"error": {"code": -32601, "message": f"Method not found: {message['method']}"}}

    def _serve(self, message):
        try:
            answer = {"result": self.on_request(message["method"], message.get("params"))}
        except McpError as exc:
            answer = {"error": {"code": exc.code or -32603, "message": str(exc)}}
        except Exception:  # noqa: BLE001 - a handler bug answers an error, never silence
            log.exception("mcp %s: answering %s failed", self.name, message["method"])
            answer = {"error": {"code": -32603, "message": "internal error"}}
        self._reply(message, answer)

    def _reply(self, message, answer):
        reply = {"jsonrpc": "2.0", "id": message["id"], **answer}
        try:
            with gevent.Timeout(CANCEL_SEND_TIMEOUT, _Expired):
                self.transport.send(reply)
        except (_Expired, McpError, OSError) as exc:
            log.info("mcp %s: could not answer %s: %s", self.name, message["method"], exc)

    def lost(self, reason):
        """The transport ended: fail everything pending, refuse what comes next."""
        if self.gone is not None:
            return
        self.gone = reason or "the server connection closed"
        pending, self._pending = self._pending, {}
        for result in pending.values():
            if not result.ready():
                result.set_exception(ServerGone(self.gone))
