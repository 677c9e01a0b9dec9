"""The other side as we talk to it: the messages we send (through the writer) and our own
requests until they are answered. Built before the endpoint that reads the other side's
lines (``endpoint.py``), so that what sends to the editor (``acp/client.py``) exists
before the router the endpoint is built with."""

import json
import logging

import gevent

from term2acp.rpc.messages import CANCEL_REQUEST, encode
from term2acp.rpc.outgoing import OutgoingRequests

wire_log = logging.getLogger("term2acp.wire")


class Peer:
    def __init__(self, send, send_wait=None, send_quick=None):
        self._send_bytes = send  # never blocks: responses, errors, our requests
        self._send_wait = send_wait  # (bytes, tag): may wait for room (notifications)
        self._send_quick = send_quick or send  # answers of quick routes (reads)
        self._outgoing = OutgoingRequests()
        self._reader = None  # the greenlet reading the other side's lines: it never waits

    def send(self, message, tag=None):
        """Queue one message. With a bounded outbox (``send_wait``) every greenlet but the
        reader waits while it is full: request handlers and turns feel the back-pressure
        (a client that stops reading cannot make us queue without bound, e.g. by asking
        for many large answers), while the reader stays free to read a cancel."""
        if wire_log.isEnabledFor(logging.DEBUG):
            wire_log.debug("<- %s", json.dumps(message)[:4000])
        send_wait = self._send_wait
        if send_wait is None or gevent.getcurrent() is self._reader:
            self._send_bytes(encode(message))
        else:
            send_wait(encode(message), tag)

    def send_encoded(self, data):
        """Lines encoded already (bytes, each as :func:`encode` makes it: a replay's stored
        updates), queued as :meth:`send` queues one message."""
        if wire_log.isEnabledFor(logging.DEBUG):
            wire_log.debug("<- %s", data[:4000].decode("utf-8", "replace"))
        if self._send_wait is None or gevent.getcurrent() is self._reader:
            self._send_bytes(data)
        else:
            self._send_wait(data, None)

    def read_by(self, greenlet):
        """``greenlet`` reads the other side's lines (the endpoint says so as it reads)."""
        self._reader = greenlet

    def send_quick(self, message):
        """An answer that reports no state (a read): it may overtake queued lines."""
        if wire_log.isEnabledFor(logging.DEBUG):
            wire_log.debug("<- %s", json.dumps(message)[:4000])
        self._send_quick(encode(message))

    def notify(self, method, params, tag=None):
        """Send a notification. ``tag``: the writer may drop it while queued when the tag
        says so (the writer's ``discard``; e.g. chunks of a cancelled turn)."""
        self.send({"jsonrpc": "2.0", "method": method, "params": params}, tag)

    def notifier(self, method, keys):
        """``send(*values, tag=None)``: :meth:`notify` of ``method`` with the params
        ``dict(zip(keys, values))``, as one call (``session/update``: every streamed chunk
        goes through it)."""
        head = {"jsonrpc": "2.0", "method": method}
        send = self.send

        def notify(*values, tag=None):
            send({**head, "params": dict(zip(keys, values))}, tag)

        return notify

    def request(self, method, params):
        """Send a request to the peer; returns ``(id, AsyncResult)``.

        The result resolves to the peer's ``result`` or raises the peer's error as an
        :class:`RpcError`; on disconnect it raises :class:`DisconnectedError`.
        """
        request_id, result = self._outgoing.start(method)
        if not self.closed:
            self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return request_id, result

    def call(self, method, params, timeout=None):
        """Send a request and block until the peer answers; returns its ``result``.

        The peer's error is raised as an :class:`RpcError` (:class:`DisconnectedError` when
        it goes away first). When the waiting greenlet is killed (a cancelled turn) or
        ``timeout`` seconds pass (``gevent.Timeout`` is raised), the request is withdrawn
        here and the peer told with ``$/cancel_request``: no caller tracks that itself.
        """
        request_id, result = self.request(method, params)
        try:
            return result.get(timeout=timeout)
        except BaseException:
            if not result.ready():
                self.cancel_outgoing(request_id)
            raise

    def cancel_outgoing(self, request_id):
        """Give up on one of our requests and tell the peer with ``$/cancel_request``."""
        if self._outgoing.withdraw(request_id):
            self.notify(CANCEL_REQUEST, {"requestId": request_id})

    def answered(self, message):
        """The peer's response to one of our requests (the endpoint read it)."""
        self._outgoing.answer(message)

    def close(self):
        """The peer stopped talking: fail every outstanding request of ours.

        Answers to requests already received are still written while stdout accepts them.
        """
        self._outgoing.close()

    @property
    def closed(self):
        return self._outgoing.closed
