"""Requests this side sends: ids, pending results, answers, withdrawal, disconnect."""

import logging

from gevent.event import AsyncResult

from term2acp.rpc.errors import DisconnectedError, RequestCancelledError, RpcError

log = logging.getLogger(__name__)


class OutgoingRequests:
    """Our request ids count from 0; each pending request is an ``AsyncResult``."""

    def __init__(self):
        self._pending = {}  # id -> (AsyncResult, method)
        self._next_id = 0
        self.closed = False

    def start(self, method):
        """A new ``(id, AsyncResult)``; already failed when the peer is gone."""
        request_id = self._next_id
        self._next_id += 1
        result = AsyncResult()
        if self.closed:
            result.set_exception(DisconnectedError())
        else:
            self._pending[request_id] = (result, method)
        return request_id, result

    def withdraw(self, request_id):
        """Give up on a request; True when it was still pending."""
        entry = self._pending.pop(request_id, None)
        if entry is None:
            return False
        entry[0].set_exception(RequestCancelledError())
        return True

    def answer(self, message):
        """Resolve the request a response names; unknown ids are logged and ignored."""
        msg_id = message.get("id")
        entry = self._pending.pop(msg_id, None) if isinstance(msg_id, (int, str)) \
            and not isinstance(msg_id, bool) else None
        if entry is None:
            if msg_id is None and isinstance(message.get("error"), dict):
                log.warning("peer rejected one of our messages: %s", message["error"].get("message"))
            else:
                log.info("ignored response to unknown request id %r", msg_id)
            return
        result, _method = entry
        if "error" in message:
            result.set_exception(RpcError.from_wire(message["error"]))
        else:
            result.set(message.get("result"))

    def close(self):
        """The peer is gone: every pending request fails with DisconnectedError."""
        self.closed = True
        pending, self._pending = self._pending, {}
        for result, method in pending.values():
            result.set_exception(DisconnectedError(f"peer disconnected before answering {method}"))
