"""Feed dicts, assert exact outbox dicts."""

import json

import gevent
import pytest
from gevent.event import Event

from term2acp.rpc.endpoint import Endpoint
from term2acp.rpc.peer import Peer
from term2acp.rpc.messages import Route
from term2acp.rpc.errors import DisconnectedError, InvalidParamsError, InvalidRequestError


class Router:
    def __init__(self):
        self.released = Event()
        self.routes = {
            "echo": Route(lambda p: {"echo": p}),
            "boom": Route(self._boom),
            "strict": Route(lambda p: p, load=self._strict),
            "block": Route(self._block),
            "note": Route(self._note, inline=True),
        }
        self.notes = []

    def admit(self, method, batch_size):
        if method == "lifecycle" and batch_size > 1:
            raise InvalidRequestError("not in a batch")

    def lookup(self, method):
        return self.routes.get(method)

    @staticmethod
    def _boom(params):
        raise RuntimeError("secret detail")

    @staticmethod
    def _strict(params):
        if "x" not in params:
            raise InvalidParamsError("x is required", data={"errors": {"x": ["Missing"]}})
        return params

    def _block(self, params):
        self.released.wait()
        return {}

    def _note(self, params):
        self.notes.append(params)


def make():
    out = []
    router = Router()
    endpoint = Endpoint(router, Peer(lambda data: out.append(json.loads(data))))
    return endpoint, router, out


def settle(endpoint):
    endpoint.join(timeout=5)


def test_endpoint_request_gets_result():
    endpoint, _, out = make()
    endpoint.receive({"jsonrpc": "2.0", "id": 1, "method": "echo", "params": {"a": 1}})
    settle(endpoint)
    assert out == [{"jsonrpc": "2.0", "id": 1, "result": {"echo": {"a": 1}}}]


def test_endpoint_unexpected_exception_is_internal_error_without_details():
    endpoint, _, out = make()
    endpoint.receive({"jsonrpc": "2.0", "id": 2, "method": "boom"})
    settle(endpoint)
    assert out == [{"jsonrpc": "2.0", "id": 2,
                    "error": {"code": -32603, "message": "Internal error: RuntimeError"}}]


def test_endpoint_invalid_params_carry_field_errors():
    endpoint, _, out = make()
    endpoint.receive({"jsonrpc": "2.0", "id": 3, "method": "strict", "params": {}})
    assert out == [{"jsonrpc": "2.0", "id": 3, "error": {
        "code": -32602, "message": "x is required", "data": {"errors": {"x": ["Missing"]}}}}]


def test_endpoint_notifications_never_answer_even_on_failure():
    endpoint, router, out = make()
    endpoint.receive({"jsonrpc": "2.0", "method": "note", "params": {"n": 1}})
    endpoint.receive({"jsonrpc": "2.0", "method": "boom"})
    endpoint.receive({"jsonrpc": "2.0", "method": "missing"})
    settle(endpoint)
    assert out == [] and router.notes == [{"n": 1}]


def test_endpoint_cancel_request_answers_32800():
    endpoint, router, out = make()
    endpoint.receive({"jsonrpc": "2.0", "id": "r1", "method": "block"})
    gevent.sleep(0)
    endpoint.receive({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "r1"}})
    settle(endpoint)
    assert out == [{"jsonrpc": "2.0", "id": "r1",
                    "error": {"code": -32800, "message": "Request cancelled"}}]


def test_endpoint_outgoing_request_resolves_with_result_and_error():
    endpoint, _, out = make()
    rid, result = endpoint.peer.request("client/thing", {"q": 1})
    assert out[-1] == {"jsonrpc": "2.0", "id": rid, "method": "client/thing", "params": {"q": 1}}
    endpoint.receive({"jsonrpc": "2.0", "id": rid, "result": {"ok": True}})
    assert result.get(timeout=1) == {"ok": True}
    rid2, result2 = endpoint.peer.request("client/thing", {})
    endpoint.receive({"jsonrpc": "2.0", "id": rid2, "error": {"code": -32601, "message": "nope"}})
    err = result2.exception
    assert err.code == -32601


def test_endpoint_disconnect_fails_pending_outgoing_requests():
    endpoint, _, _ = make()
    _, result = endpoint.peer.request("client/thing", {})
    endpoint.peer.close()
    assert isinstance(result.exception, DisconnectedError)
    _, late = endpoint.peer.request("client/thing", {})
    assert isinstance(late.exception, DisconnectedError)


def test_endpoint_cancel_outgoing_sends_cancel_request():
    endpoint, _, out = make()
    rid, result = endpoint.peer.request("client/thing", {})
    endpoint.peer.cancel_outgoing(rid)
    assert result.exception.code == -32800
    assert out[-1] == {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": rid}}
    endpoint.receive({"jsonrpc": "2.0", "id": rid, "result": {}})  # late answer: ignored


def test_endpoint_call_returns_the_answer_and_raises_the_peers_error():
    endpoint, _, out = make()
    waiter = gevent.spawn(endpoint.peer.call, "client/thing", {"x": 1})
    gevent.sleep(0)
    rid = out[-1]["id"]
    endpoint.receive({"jsonrpc": "2.0", "id": rid, "result": {"ok": True}})
    assert waiter.get(timeout=5) == {"ok": True}
    failing = gevent.spawn(endpoint.peer.call, "client/thing", {})
    gevent.sleep(0)
    endpoint.receive({"jsonrpc": "2.0", "id": out[-1]["id"],
                      "error": {"code": -32601, "message": "no"}})
    failing.join(timeout=5)
    assert failing.exception.code == -32601
    assert not [m for m in out if m.get("method") == "$/cancel_request"]


@pytest.mark.parametrize("how", ["killed", "timeout"])
def test_endpoint_call_withdraws_when_its_caller_stops_waiting(how):
    """A cancelled turn (the greenlet killed) or a timeout withdraws the request and tells
    the peer; the late answer is ignored."""
    endpoint, _, out = make()
    waiter = gevent.spawn(endpoint.peer.call, "client/thing", {}, 0.01 if how == "timeout" else None)
    gevent.sleep(0)
    rid = out[-1]["id"]
    if how == "killed":
        waiter.kill(block=True, timeout=5)
    else:
        waiter.join(timeout=5)
        assert isinstance(waiter.exception, gevent.Timeout)
    assert out[-1] == {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": rid}}
    endpoint.receive({"jsonrpc": "2.0", "id": rid, "result": {}})  # late answer: ignored


def test_endpoint_batch_collects_responses_in_one_array():
    endpoint, _, out = make()
    endpoint.receive([{"jsonrpc": "2.0", "id": 1, "method": "echo", "params": {}},
                      {"jsonrpc": "2.0", "method": "note", "params": {}},
                      {"jsonrpc": "2.0", "id": 2, "method": "lifecycle"}])
    settle(endpoint)
    assert len(out) == 1 and isinstance(out[0], list)
    by_id = {m["id"]: m for m in out[0]}
    assert by_id[1]["result"] == {"echo": {}}
    assert by_id[2]["error"]["code"] == -32600


def test_endpoint_oversized_and_bad_utf8_lines():
    from term2acp.rpc.stream import Oversized

    endpoint, _, out = make()
    endpoint.receive_line(Oversized(10))
    endpoint.receive_line(b"\xc3\x28")
    endpoint.receive_line(b'{"jsonrpc":"2.0","id":1,"method":"echo","params":{"v":Infinity}}')
    assert [m["error"]["code"] for m in out] == [-32600, -32700, -32700]
    assert all(m["id"] is None for m in out)


def test_endpoint_lone_surrogates_are_encoded_safely():
    """Neither raw (invalid UTF-8) nor as an escape (strict parsers refuse a lone surrogate
    escape): a lone surrogate goes out as U+FFFD; a real pair is untouched."""
    raw = []
    endpoint = Endpoint(Router(), Peer(raw.append))
    endpoint.receive({"jsonrpc": "2.0", "id": 1, "method": "echo",
                      "params": {"s": "a\ud800b", "\udcff": "\U0001F600"}})
    settle(endpoint)
    line = raw[0]
    line.decode("utf-8")  # valid UTF-8
    assert b"\\ud" not in line.lower()
    assert json.loads(line)["result"] == {"echo": {"s": "a\ufffdb", "\ufffd": "\U0001F600"}}


def _deep(depth):
    return '{"x":' * depth + "1" + "}" * depth


def test_endpoint_refuses_messages_nesting_deeper_than_64_levels():
    endpoint, router, out = make()
    ok = f'{{"jsonrpc":"2.0","id":1,"method":"echo","params":{_deep(63)}}}'.encode()
    endpoint.receive_line(ok)  # 64 levels with the envelope and params
    settle(endpoint)
    assert "result" in out[-1]
    endpoint.receive_line(f'{{"jsonrpc":"2.0","id":2,"method":"echo","params":{_deep(64)}}}'.encode())
    settle(endpoint)
    assert out[-1]["id"] == 2 and out[-1]["error"]["code"] == -32600
    assert "deeper than 64 levels" in out[-1]["error"]["message"]
    endpoint.receive_line(f'{{"jsonrpc":"2.0","method":"note","params":{_deep(900)}}}'.encode())
    assert router.notes == [] and len(out) == 2  # a deep notification is dropped
    endpoint.receive_line(f"[{_deep(900)}]".encode())
    assert out[-1] == {"jsonrpc": "2.0", "id": None, "error": out[-1]["error"]}


def test_endpoint_a_deep_answer_fails_our_request():
    endpoint, _, out = make()
    rid, result = endpoint.peer.request("client/thing", {})
    endpoint.receive_line(f'{{"jsonrpc":"2.0","id":{rid},"result":{_deep(100)}}}'.encode())
    with pytest.raises(InvalidRequestError):
        result.get(timeout=1)


def test_endpoint_route_mark_runs_in_the_reader_before_the_next_line():
    endpoint, router, out = make()
    seen = []
    router.routes["slow"] = Route(lambda p: seen.append(("handler", p["n"])),
                                  mark=lambda p: seen.append(("mark", p["n"])))
    endpoint.receive({"jsonrpc": "2.0", "id": 1, "method": "slow", "params": {"n": 1}})
    assert seen == [("mark", 1)]  # the handler has not run yet: it has its own greenlet
    settle(endpoint)
    assert seen == [("mark", 1), ("handler", 1)]


def test_endpoint_everything_but_the_reader_waits_for_room():
    waited, plain = [], []
    endpoint = Endpoint(Router(), Peer(plain.append,
                        send_wait=lambda data, tag: waited.append((json.loads(data), tag))))
    gevent.spawn(endpoint.peer.notify, "n", {}, "t1").join()
    assert [tag for _, tag in waited] == ["t1"] and plain == []
    endpoint.receive_line(b'{"jsonrpc":"2.0","id":1,"method":"echo"}')  # this greenlet reads
    endpoint.receive_line(b'{"jsonrpc":"2.0","id":2,"method":"nope"}')
    endpoint.peer.notify("n", {}, "t2")
    assert [json.loads(p).get("id") for p in plain] == [2, None]  # the reader's own: no wait
    settle(endpoint)
    assert waited[-1] == ({"jsonrpc": "2.0", "id": 1, "result": {"echo": {}}}, None)


def test_endpoint_a_full_request_pool_is_refused_without_blocking_the_reader():
    from gevent.pool import Pool

    out = []
    router = Router()
    endpoint = Endpoint(router, Peer(lambda data: out.append(json.loads(data))), pool=Pool(1))
    endpoint.receive({"jsonrpc": "2.0", "id": 1, "method": "block"})
    endpoint.receive({"jsonrpc": "2.0", "id": 2, "method": "block"})  # returns at once
    endpoint.receive([{"jsonrpc": "2.0", "id": 3, "method": "echo"}])
    assert [(m[0]["id"] if isinstance(m, list) else m["id"]) for m in out] == [2, 3]
    assert out[0]["error"]["code"] == -32003 and "in flight" in out[0]["error"]["message"]
    endpoint.receive({"jsonrpc": "2.0", "method": "note", "params": {"n": 1}})  # inline: runs
    assert router.notes == [{"n": 1}]
    router.released.set()
    settle(endpoint)
    assert out[-1] == {"jsonrpc": "2.0", "id": 1, "result": {}}


def test_endpoint_a_backlogged_outbox_drops_id_less_errors_only():
    out = []
    backlog = [True]
    endpoint = Endpoint(Router(), Peer(lambda data: out.append(json.loads(data))),
                        backlogged=lambda: backlog[0])
    for _ in range(100):
        endpoint.receive_line(b"not json")
    endpoint.receive_line(b'{"jsonrpc":"2.0","id":7,"method":"nope"}')
    assert [m["id"] for m in out] == [7] and endpoint.dropped_errors == 100
    backlog[0] = False
    endpoint.receive_line(b"not json")
    assert out[-1]["id"] is None and out[-1]["error"]["code"] == -32700
