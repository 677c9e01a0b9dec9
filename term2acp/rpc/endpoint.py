"""JSON-RPC 2.0 semantics: dispatch of what the other side sends, batches, responses.

The endpoint is built whole with its router (what the methods mean: ``Route`` in
``messages.py``, with the encoding and the envelope checks) and its ``Peer``
(``peer.py``: what we send, through an injected ``send`` callable, so tests can drive it
with plain lists, and our own requests, ``outgoing.py``'s). It is fed decoded lines by
the reader. This package knows only JSON-RPC.
"""

import logging

import gevent
from gevent.pool import Group, Pool

from term2acp.core.cancel import CancelledExit
from term2acp.core.nesting import MAX_DEPTH, top_level_members
from term2acp.rpc.errors import (
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    MethodNotFoundError,
    OverloadedError,
    ParseError,
    RequestCancelledError,
    RpcError,
)
from term2acp.rpc.messages import (CANCEL_REQUEST, PARAMS_SHAPE, decode, envelope_error,
                                   error_response, id_key, nests_too_deep, structured,
                                   valid_id)
from term2acp.rpc.stream import Oversized

log = logging.getLogger(__name__)
wire_log = logging.getLogger("term2acp.wire")

class Endpoint:
    def __init__(self, router, peer, pool=None, max_line=None, backlogged=None, wire_mask=None):
        self.router = router  # admit(method, batch_size), lookup(method) -> Route or None
        self.peer = peer  # rpc/peer.py: what we send, our requests and their answers
        # backlogged() -> True while the outbox is full (the client is not reading): the
        # reader then drops its id-less error answers instead of queueing them without
        # bound (nobody can match them to a request anyway); answers with an id still go.
        self._backlogged = backlogged
        self.dropped_errors = 0
        # wire_mask(message) -> the text the DEBUG wire log shows of an incoming message
        # that carries secrets (the editor's MCP env and header values), or None: as read.
        self._wire_mask = wire_mask or (lambda message: None)
        self._pool = pool if pool is not None else Pool(256)
        self._active = {}  # id key -> greenlet of an incoming request
        self._collectors = Group()  # one per batch with spawned entries (bounded by the pool)
        self.max_line = max_line

    def cancel_incoming(self):
        """Shutdown: abort every in-flight incoming request (each answers -32800)."""
        for greenlet in list(self._active.values()):
            greenlet.kill(CancelledExit, block=False)

    @property
    def pool(self):
        return self._pool

    def join(self, timeout=None):
        """Wait (bounded) for in-flight requests and the batches collecting their answers."""
        self._pool.join(timeout=timeout)
        self._collectors.join(timeout=timeout)

    # ------------------------------------------------------------------ input
    def receive_line(self, line):
        """Handle one framed line (bytes) or an :class:`Oversized` marker."""
        self.peer.read_by(gevent.getcurrent())
        if isinstance(line, Oversized):
            limit = f" of {self.max_line} bytes" if self.max_line else ""
            self._send_error(None, InvalidRequestError(
                f"message of {line.size} bytes exceeds the line limit{limit}; it was discarded"))
            return
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            self._send_error(None, ParseError(f"Parse error: line is not valid UTF-8 ({exc.reason} at byte {exc.start})"))
            return
        try:
            message = decode(text)
        except RecursionError:  # deeper than the parser goes: refused as too deep, with
            self._refuse_deep(top_level_members(text))  # its id when it can be found
            return
        except ValueError as exc:
            self._send_error(None, ParseError(f"Parse error: {str(exc)[:200]}"))
            return
        if wire_log.isEnabledFor(logging.DEBUG):
            wire_log.debug("-> %s", (self._wire_mask(message) or text)[:4000])
        if nests_too_deep(line, message):
            self._refuse_deep(message)
            return
        self.receive(message)

    def _refuse_deep(self, message):
        """A message nesting deeper than MAX_DEPTH: refused whole, with its id if it has one."""
        error = InvalidRequestError(f"message nests arrays/objects deeper than {MAX_DEPTH} "
                                    "levels; it was discarded")
        msg_id = message.get("id") if isinstance(message, dict) else None
        if not valid_id(msg_id):
            msg_id = None
        if isinstance(message, dict) and "method" not in message and msg_id is not None:
            # an answer to one of our requests: it fails (a permission request denies)
            self.peer.answered({"id": msg_id, "error": error.to_wire()})
            return
        if isinstance(message, dict) and "method" in message and "id" not in message:
            self._drop(str(message.get("method"))[:100], error)
            return
        self._send_error(msg_id, error)

    def receive(self, message):
        """Handle one decoded JSON value: a message or a batch."""
        if isinstance(message, list):
            self._receive_batch(message)
        elif isinstance(message, dict):
            outcome = self._receive_message(message, batch_size=1)
            if isinstance(outcome, dict):
                self.peer.send_quick(outcome)  # made by the reader: see _send_error
        else:
            self._send_error(None, InvalidRequestError("a JSON-RPC message must be an object or a batch array"))

    def _receive_batch(self, batch):
        """A batch: each entry is handled by its kind; the answers go out as one array
        (a collector waits for the entries that run in their own greenlets)."""
        if not batch:
            self._send_error(None, InvalidRequestError("empty batch"))
            return
        outcomes = []
        for entry in batch:
            if isinstance(entry, dict):
                outcome = self._receive_message(entry, batch_size=len(batch), batched=True)
            else:
                outcome = error_response(None, InvalidRequestError("batch entry must be an object"))
            if outcome is not None:
                outcomes.append(outcome)
        if not outcomes:
            return
        if all(isinstance(o, dict) for o in outcomes):
            self.peer.send(outcomes)
            return
        # not from the pool: its entries may have filled it, and the reader must not wait
        self._collectors.spawn(self._collect, outcomes).name = "rpc-batch"

    def _collect(self, outcomes):
        responses = []
        for outcome in outcomes:
            if isinstance(outcome, dict):
                responses.append(outcome)
            else:
                outcome.join()
                if isinstance(outcome.value, dict):
                    responses.append(outcome.value)
        if responses:
            self.peer.send(responses)

    def _receive_message(self, msg, batch_size, batched=False):
        """One message object, handed to the function for its kind: a response to one of
        our requests, a request, or a notification. Returns a response dict, a greenlet
        that will produce one (a batched request), or None."""
        if "method" not in msg:
            return self._receive_response(msg)
        refused = envelope_error(msg)
        if refused is not None:
            return refused
        if "id" in msg:
            return self._receive_request(msg, batch_size, batched)
        self._receive_notification(msg["method"], msg.get("params"), batch_size)
        return None

    # ------------------------------------------------------------ responses
    def _receive_response(self, msg):
        if "id" in msg and ("result" in msg or "error" in msg):
            self.peer.answered(msg)
            return None
        return error_response(None, InvalidRequestError("message has neither a method nor a result or error"))

    # ------------------------------------------------------------ requests
    def _receive_request(self, msg, batch_size, batched):
        """Route, load and mark in the reader; run inline or in a pooled greenlet."""
        msg_id, method, params = msg["id"], msg["method"], msg.get("params")
        if not structured(params):
            return error_response(msg_id, PARAMS_SHAPE)
        try:
            route = self._route(method, batch_size)
            value = self._load(route, params)
        except RpcError as exc:
            return error_response(msg_id, exc)
        if route.mark is not None:
            self._mark(method, route, value)
        if route.inline:
            return self._outcome(msg_id, method, route, value)
        if self._pool.full():  # spawning would block the reader (and a cancel behind it)
            return error_response(msg_id, OverloadedError(
                f"{self._pool.size} requests are already in flight; wait for their responses "
                "before sending more"))
        key = id_key(msg_id)
        greenlet = self._pool.spawn(self._run_request, key, msg_id, method, route, value, batched)
        greenlet.name = f"req-{msg_id}-{method}"
        self._active[key] = greenlet
        return greenlet if batched else None

    def _route(self, method, batch_size):
        self.router.admit(method, batch_size)
        route = self.router.lookup(method)
        if route is None:
            raise MethodNotFoundError(f"Method not found: {method}", data={"method": method})
        return route

    @staticmethod
    def _load(route, params):
        if isinstance(params, list):
            raise InvalidParamsError("params must be an object")
        return route.load({} if params is None else params)

    def _run_request(self, key, msg_id, method, route, value, batched):
        try:
            response = self._outcome(msg_id, method, route, value)
        finally:
            if self._active.get(key) is gevent.getcurrent():
                del self._active[key]
        if batched:
            return response
        if route.quick:
            self.peer.send_quick(response)
        else:
            self.peer.send(response)
        return None

    @staticmethod
    def _outcome(msg_id, method, route, value):
        """The one funnel: every handler outcome becomes a result or an error response."""
        try:
            result = route.handler(value)
        except CancelledExit:
            return error_response(msg_id, RequestCancelledError())
        except RpcError as exc:
            return error_response(msg_id, exc)
        except Exception as exc:  # noqa: BLE001 - the funnel
            log.exception("internal error in %s", method)
            return error_response(msg_id, InternalError(f"Internal error: {type(exc).__name__}"))
        return {"jsonrpc": "2.0", "id": msg_id, "result": {} if result is None else result}

    # ------------------------------------------------------------ notifications
    def _receive_notification(self, method, params, batch_size):
        """Never answered: whatever fails is logged and dropped."""
        if not structured(params):
            self._drop(method, PARAMS_SHAPE)
            return
        if method == CANCEL_REQUEST:
            request_id = params.get("requestId") if isinstance(params, dict) else None
            greenlet = self._active.get(id_key(request_id)) if valid_id(request_id) else None
            if greenlet is not None:
                greenlet.kill(CancelledExit, block=False)
            return
        try:
            route = self._route(method, batch_size)
            value = self._load(route, params)
        except RpcError as exc:
            self._drop(method, exc)
            return
        if route.mark is not None:
            self._mark(method, route, value)
        try:
            if route.inline:
                route.handler(value)
            elif self._pool.full():
                self._drop(method, OverloadedError())
            else:
                self._pool.spawn(self._run_notification, method, route, value).name = f"note-{method}"
        except Exception:  # noqa: BLE001 - notifications never answer
            log.exception("notification %s failed", method)

    @staticmethod
    def _mark(method, route, value):
        try:
            route.mark(value)
        except Exception:  # noqa: BLE001 - the handler still runs and reports
            log.exception("marking %s failed", method)

    @staticmethod
    def _run_notification(method, route, value):
        try:
            route.handler(value)
        except CancelledExit:
            pass
        except Exception:  # noqa: BLE001
            log.exception("notification %s failed", method)

    @staticmethod
    def _drop(method, error):
        log.info("dropped notification %s: %s", method, error.message)

    def _send_error(self, msg_id, error):
        if msg_id is None and self._backlogged is not None and self._backlogged():
            self.dropped_errors += 1
            if self.dropped_errors in (1, 1000) or self.dropped_errors % 100_000 == 0:
                log.warning("the client is not reading; %d id-less error answers dropped so far "
                            "(last: %s)", self.dropped_errors, error.message[:200])
            return
        # An answer the reader made itself (a refused message, an inline route's outcome)
        # reports nothing the store keeps: a quick line, not behind the session updates
        # queued before it (what 20 streaming turns queue takes the client a while to read)
        self.peer.send_quick(error_response(msg_id, error))


