"""JSON-RPC error vocabulary: one class per code, ``CODE`` and ``MESSAGE`` on the class."""


class RpcError(Exception):
    """An error that is answered on the wire as a JSON-RPC error object."""

    CODE = -32603
    MESSAGE = "Internal error"

    def __init__(self, message=None, data=None):
        self.message = message or self.MESSAGE
        self.data = data
        super().__init__(self.message)

    @property
    def code(self):
        return self.CODE

    def to_wire(self):
        error = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    @classmethod
    def from_wire(cls, error):
        """Build the matching error from a received error object (tolerating junk)."""
        if not isinstance(error, dict):
            return InternalError("malformed error object", data=error)
        code = error.get("code")
        message = error.get("message")
        klass = _BY_CODE.get(code, RpcError)
        err = klass(message if isinstance(message, str) else None, error.get("data"))
        if klass is RpcError and isinstance(code, int) and not isinstance(code, bool):
            err.CODE = code
        return err


class ParseError(RpcError):
    CODE = -32700
    MESSAGE = "Parse error"


class InvalidRequestError(RpcError):
    CODE = -32600
    MESSAGE = "Invalid request"


class MethodNotFoundError(RpcError):
    CODE = -32601
    MESSAGE = "Method not found"


class InvalidParamsError(RpcError):
    CODE = -32602
    MESSAGE = "Invalid params"


class InternalError(RpcError):
    CODE = -32603
    MESSAGE = "Internal error"


class RequestCancelledError(RpcError):
    CODE = -32800
    MESSAGE = "Request cancelled"


class AuthRequiredError(RpcError):
    CODE = -32000
    MESSAGE = "Authentication required"


class BusyError(RpcError):
    """ACP uses -32000 for a prompt refused because the session is busy."""

    CODE = -32000
    MESSAGE = "Session is already processing foreground work"


class ResourceNotFoundError(RpcError):
    CODE = -32002
    MESSAGE = "Resource not found"


class OverloadedError(RpcError):
    """Too many requests in flight: refused at once, so the reader never waits for room."""

    CODE = -32003
    MESSAGE = "Too many requests in flight"


class DisconnectedError(RpcError):
    """Local only: the peer went away before answering one of our requests."""

    CODE = -32603
    MESSAGE = "Peer disconnected"


_BY_CODE = {
    klass.CODE: klass
    for klass in (
        ParseError,
        InvalidRequestError,
        MethodNotFoundError,
        InvalidParamsError,
        InternalError,
        RequestCancelledError,
        AuthRequiredError,
        ResourceNotFoundError,
    )
}
