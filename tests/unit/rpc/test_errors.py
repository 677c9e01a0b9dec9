import pytest

from term2acp.rpc import errors as e


@pytest.mark.parametrize("klass, code, message", [
    (e.ParseError, -32700, "Parse error"),
    (e.InvalidRequestError, -32600, "Invalid request"),
    (e.MethodNotFoundError, -32601, "Method not found"),
    (e.InvalidParamsError, -32602, "Invalid params"),
    (e.InternalError, -32603, "Internal error"),
    (e.RequestCancelledError, -32800, "Request cancelled"),
    (e.AuthRequiredError, -32000, "Authentication required"),
    (e.ResourceNotFoundError, -32002, "Resource not found"),
])
def test_errors_pin_every_code(klass, code, message):
    err = klass()
    assert err.to_wire() == {"code": code, "message": message}
    back = e.RpcError.from_wire(err.to_wire())
    assert type(back) is klass and back.code == code


def test_errors_from_wire_tolerate_junk():
    assert e.RpcError.from_wire("nope").code == -32603
    custom = e.RpcError.from_wire({"code": -32099, "message": 5})
    assert custom.code == -32099 and custom.message == "Internal error"
