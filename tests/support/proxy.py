"""A tiny HTTP ``CONNECT`` proxy for provider tests (gevent, loopback, bounded).

It accepts ``CONNECT host:port``, records the request (``tunnels``: target and headers),
optionally demands ``Proxy-Authorization`` (answering 407 without it), maps host names to
real addresses through ``hosts`` (so a test can use a name that only the proxy resolves,
as a real proxy resolves names the client cannot; an ``(address, port)`` value sends
every port of that name to one loopback server), and then relays bytes both ways until
either side closes. :meth:`stop` ends every tunnel.
"""

import socket

import gevent
from gevent.pool import Group, Pool
from gevent.server import StreamServer


class ConnectProxy:
    def __init__(self, hosts=None, auth=None):
        self.hosts = dict(hosts or {})
        self.auth = auth  # expected Proxy-Authorization header value, or None
        self.tunnels = []  # (target "host:port", headers dict)
        self._pipes = Group()
        self._server = StreamServer(("127.0.0.1", 0), self._handle, spawn=Pool(32))

    def start(self):
        self._server.start()
        return self

    def stop(self):
        self._server.stop(timeout=0)
        self._pipes.kill(block=True, timeout=5)

    @property
    def url(self):
        return f"http://127.0.0.1:{self._server.server_port}"

    def _handle(self, client, _address):
        upstream = None
        try:
            reader = client.makefile("rb")
            line = reader.readline(65536).decode("latin-1")
            headers = {}
            while True:
                header = reader.readline(65536).decode("latin-1").strip()
                if not header:
                    break
                name, _, value = header.partition(":")
                headers[name.strip().lower()] = value.strip()
            method, target, _ = (line.split(" ", 2) + ["", ""])[:3]
            self.tunnels.append((target, headers))
            if method != "CONNECT":
                client.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                return
            if self.auth is not None and headers.get("proxy-authorization") != self.auth:
                client.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                               b"Content-Length: 0\r\n\r\n")
                return
            host, _, port = target.rpartition(":")
            address = self.hosts.get(host, host)
            if isinstance(address, tuple):  # (address, port): a real name's port 443 too
                address, port = address
            try:
                upstream = socket.create_connection((address, int(port)), timeout=5)
            except OSError:
                client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                return
            upstream.settimeout(None)
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            there = self._pipes.spawn(_pipe, client, upstream)
            _pipe(upstream, client)
            there.join(timeout=5)
            there.kill()
        except OSError:
            return
        finally:
            if upstream is not None:
                upstream.close()
            client.close()


def _pipe(source, sink):
    """Relay bytes until ``source`` ends; then half-close ``sink``."""
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    try:
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    gevent.sleep(0)
