"""The pieces between pygls and a server's pipes: the reader pygls's framing loop reads
from, the writer it sends through, a converter that leaves messages as JSON, and what the
client says it can do."""

import gevent.event

from term2acp import sandbox

MAX_MESSAGE = 32 << 20  # one message from the server; a longer one fails it


def plain_json(protocol):
    """A converter factory that leaves params and results as the JSON they are (pygls
    makes namedtuples of them, a class per object: slow for hundreds of diagnostics)."""
    def factory():
        converter = protocol.default_converter()
        for cls in (protocol.JsonRPCRequestMessage, protocol.JsonRPCResponseMessage,
                    protocol.JsonRPCNotification):
            names = [a.name for a in cls.__attrs_attrs__]
            converter.register_structure_hook(
                cls, lambda obj, cls, names=names: cls(**{k: obj.get(k) for k in names}))
        return converter
    return factory


class TooLarge(Exception):
    pass


class Pipe:
    """The server's stdout as pygls's reader wants it (``readline``, ``read``), fed by
    the process's output pump."""

    def __init__(self):
        self.buf, self.closed = bytearray(), False
        self.ready = gevent.event.Event()

    def feed(self, data):
        self.buf += data
        self.ready.set()

    def close(self):
        self.closed = True
        self.ready.set()

    def _until(self, test):
        while not test():
            if self.closed:
                return False
            self.ready.clear()
            self.ready.wait()
        return True

    def readline(self):
        if not self._until(lambda: b"\n" in self.buf[:65536] or len(self.buf) > 65536):
            return b""
        end = self.buf.find(b"\n", 0, 65536) + 1 or 65536
        line = bytes(self.buf[:end])
        del self.buf[:end]
        return line

    def read(self, size):
        if size > MAX_MESSAGE:
            raise TooLarge()
        if not self._until(lambda: len(self.buf) >= size):
            return b""
        data = bytes(self.buf[:size])
        del self.buf[:size]
        return data


class Writer:
    """pygls's writer: one message at a time into the server's stdin. A write cut short
    (a timeout, a cancel) leaves half a message behind: the server is killed then."""

    def __init__(self, connection):
        self.connection = connection

    def write(self, data):
        conn = self.connection
        if conn.gone is not None:
            return
        with conn._write_lock:
            try:
                conn.process.write(data)
            except sandbox.InputClosed:
                conn._lose(conn._reason(f"{conn.name} no longer reads its input"))
            except BaseException:
                conn._lose(f"{conn.name} stopped reading its input (a write was cut short)")
                conn.process.kill()
                raise

    def close(self):
        pass


def is_diagnostic(item):
    try:
        start = item["range"]["start"]
        return isinstance(start["line"], int) and isinstance(start["character"], int) \
            and isinstance(item["message"], str)
    except (KeyError, TypeError):
        return False


CAPABILITIES = {
    "general": {"positionEncodings": ["utf-16"]},
    "workspace": {"configuration": True, "workspaceFolders": True, "symbol": {}},
    "textDocument": {
        "synchronization": {}, "publishDiagnostics": {"versionSupport": True},
        "definition": {"linkSupport": True}, "references": {},
        "hover": {"contentFormat": ["markdown", "plaintext"]},
        "documentSymbol": {"hierarchicalDocumentSymbolSupport": True}},
}
