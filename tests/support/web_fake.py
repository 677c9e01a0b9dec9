"""A small web server on 127.0.0.1 for web_fetch tests: fixed pages, redirects, binary.

``WebServer(pages)`` serves ``pages``: ``path -> (status, headers dict, body bytes)``; an
unknown path is 404. Every request is recorded as ``(host header, path)`` in
``requests``, so a test can prove that nothing was fetched. Runs in gevent greenlets.
"""

from gevent.pool import Pool
from gevent.server import StreamServer


class WebServer:
    def __init__(self, pages, host="127.0.0.1"):
        self.pages = pages
        self.host = host  # any 127.x.y.z: a second loopback "host" for cross-host redirects
        self.requests = []
        self._pool = Pool(16)
        self._server = StreamServer((host, 0), self._handle, spawn=self._pool)

    def start(self):
        self._server.start()
        return self

    def stop(self):
        self._server.stop(timeout=0)

    @property
    def port(self):
        return self._server.server_port

    def url(self, path):
        return f"http://{self.host}:{self.port}{path}"

    def _handle(self, sock, _address):
        reader = sock.makefile("rb")
        try:
            line = reader.readline().decode("latin-1")
            if not line:
                return
            _method, path, _version = line.split(" ", 2)
            host = ""
            while True:
                header = reader.readline().decode("latin-1").strip()
                if not header:
                    break
                name, _, value = header.partition(":")
                if name.strip().lower() == "host":
                    host = value.strip()
            self.requests.append((host, path))
            status, headers, body = self.pages.get(path, (404, {"Content-Type": "text/plain"},
                                                          b"not here"))
            head = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}", "Connection: close"]
            head += [f"{k}: {v}" for k, v in headers.items()]
            sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
        except OSError:
            pass
        finally:
            reader.close()
            sock.close()
