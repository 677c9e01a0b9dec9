"""A stdlib-only stand-in for tests/support/mcp_server.py: the same command line, tools and
wire behaviour, without importing mcp/pydantic/uvicorn (about 1.5 s of CPU a start).

Runs in its own process (threads, never gevent)::

    python3 tests/support/mcp_fake.py stdio
    python3 tests/support/mcp_fake.py http     # streamable HTTP on 127.0.0.1, POST/GET/DELETE /mcp
    python3 tests/support/mcp_fake.py sse      # the legacy HTTP+SSE transport, GET /sse

For ``http`` and ``sse`` it prints ``PORT <n>`` once the socket listens.

Knobs for attack tests, from the environment (none changes the default behaviour):
``MCP_FAKE_MANY=n`` adds n tools ``many_<i>``, ``big`` (answers ``size`` bytes) and
``env_error`` (an error answer quoting a variable's value); ``MCP_FAKE_TOOLS`` a JSON list of tool
definitions served as given (each answers ``raw <name>``); ``MCP_FAKE_PAGE`` the page
size of tools/list; ``MCP_FAKE_ENDPOINT`` the SSE ``endpoint`` event (``{sid}`` is the
session id), e.g. on another origin; ``MCP_FAKE_IGNORE_EOF=1`` keeps a stdio server
running after its stdin ends, SIGTERM ignored; ``MCP_FAKE_JSON=1`` answers streamable HTTP
requests with an ``application/json`` body (the SDK's ``json_response`` mode);
``MCP_FAKE_SESSION_ID`` is the session id a streamable HTTP server assigns;
``MCP_FAKE_EOF_GATE`` holds a stdio server's stop until the test lets it go (hold_at_eof);
``MCP_FAKE_TLS=cert.pem:key.pem`` serves HTTPS with that certificate.

What it says on the wire was captured from the official server (mcp 2.3, the SDK that
mcp_server.py uses) and is reproduced here: compact JSON with the SDK's key order, the
initialize result (capabilities, the client's version when it is one of the handshake
versions, else 2025-11-25), tools/list pages of 4 with ``nextCursor``, the tool results
(``content``, ``isError``, ``structuredContent`` for tools with an output schema), errors
(-32601 "Method not found" with the method as ``data``; an unknown tool is an isError
result), notifications/tools/list_changed before the answer of ``grow`` (on the GET stream
over streamable HTTP), no answer to a cancelled request, the same lines on stderr. Over
streamable HTTP every answer is a one-event ``text/event-stream``; the status codes and
bodies for a missing/unknown session, a bad Accept or Content-Type, unparsable bodies, a
second GET stream, DELETE and other methods are the official ones. Keep it in step with
mcp_server.py: the tests that still run the official server (``official=True``) guard it.
"""

import json
import os
import queue
import socket
import socketserver
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PAGE = int(os.environ.get("MCP_FAKE_PAGE") or 4)
FILLERS = 5
PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
try:
    import mcp_fake_features as features  # run as a script: tests/support is on the path
except ImportError:
    from tests.support import mcp_fake_features as features

HANDSHAKE_VERSIONS = features.versions(("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"))
LATEST_HANDSHAKE = HANDSHAKE_VERSIONS[-1]
SERVER_NAME = "term2-test-server"
SSE_PING = 15.0  # sse-starlette's default comment ping


def dumps(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


class ToolFailed(Exception):
    """An isError result with this text."""


class Cancelled(Exception):
    pass


class RpcFailed(Exception):
    """A JSON-RPC error answer (-32603) with this message."""


# ------------------------------------------------------------------ tools
TYPES = {str: "string", int: "integer", float: "number"}


class Tool:
    def __init__(self, name, description, fn, params=(), returns=str, title=None):
        self.name, self.description, self.fn = name, description, fn
        self.params, self.returns = list(params), returns
        title = title or name
        props = {p: {"title": p.replace("_", " ").title(), "type": TYPES[t]} for p, t in self.params}
        schema = {"properties": props}
        if self.params:
            schema["required"] = [p for p, _ in self.params]
        schema.update(type="object", title=f"{title}Arguments")
        self.schema = {"description": description, "inputSchema": schema, "name": name}
        if returns in TYPES:
            self.schema["outputSchema"] = {
                "properties": {"result": {"title": "Result", "type": TYPES[returns]}},
                "required": ["result"], "type": "object", "title": f"{title}Output"}

    def validate(self, arguments):
        """pydantic-shaped messages for missing and mistyped arguments."""
        errors, values, bad = [], {}, []
        for name, kind in self.params:
            if name not in arguments:
                errors.append(f"{name}\n  Field required [type=missing, input_value="
                              f"{arguments!r}, input_type=dict]\n    For further information "
                              f"visit https://errors.pydantic.dev/2.13/v/missing")
                bad.append(name)
                continue
            value = arguments[name]
            try:
                values[name] = _coerce(value, kind)
            except ValueError as exc:
                code = getattr(exc, "code", f"{kind.__name__}_parsing")
                errors.append(f"{name}\n  {exc} [type={code}, input_value="
                              f"{value!r}, input_type={type(value).__name__}]\n    For further "
                              f"information visit https://errors.pydantic.dev/2.13/v/{code}")
                bad.append(name)
        if errors:
            count = f"{len(errors)} validation error{'s' if len(errors) > 1 else ''}"
            raise _Rejected(bad, f"{count} for {self.name if self.name != 'extra' else '<lambda>'}"
                                 "Arguments\n" + "\n".join(errors))
        return values


class _Kinded(ValueError):
    def __init__(self, text, code):
        super().__init__(text)
        self.code = code


class _Rejected(Exception):
    def __init__(self, names, text):
        super().__init__(text)
        self.names = names


def _coerce(value, kind):
    if kind is str:
        if not isinstance(value, str):
            raise ValueError("Input should be a valid string")
        return value
    if kind is int:
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, int):
            return value
        if isinstance(value, float):
            if value.is_integer():
                return int(value)
            raise _Kinded("Input should be a valid integer, got a number with a fractional part",
                          "int_from_float")
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                raise ValueError("Input should be a valid integer, unable to parse string as an "
                                 "integer") from None
        raise ValueError("Input should be a valid integer")
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError("Input should be a valid number")  # noqa: TRY004 - pydantic wording
    try:
        return float(value)
    except ValueError:
        raise ValueError("Input should be a valid number, unable to parse string as a number") from None


class Server:
    """The protocol, independent of the transport: ``handle(message, ctx)`` returns the
    answer (or None); ``ctx.notify(message)`` sends a notification, ``ctx.cancel`` is the
    request's cancellation event."""

    def __init__(self):
        self.lock = threading.Lock()
        self.inflight = {}  # request id -> Event
        self.tools = [
            Tool("echo", "Echo the text back.", lambda a, c: f"echo: {a['text']}", [("text", str)]),
            Tool("add", "Add two integers.", lambda a, c: a["a"] + a["b"], [("a", int), ("b", int)], int),
            Tool("fail", "Always fails with the given message.", self._fail, [("message", str)]),
            Tool("crash", "Exit the server process in the middle of the call.", self._crash),
            Tool("slow", "Sleep for a while, then answer.", self._slow, [("seconds", float)]),
            Tool("garbage", "Write lines that are not JSON-RPC on stdout, then answer.", self._garbage),
            Tool("grow", "Add the tool 'extra' and announce it with tools/list_changed.", self._grow),
            Tool("picture", "Return a one-pixel PNG and a caption.", self._picture, returns=list),
            Tool("env_probe", "The value of an environment variable, or <unset>.",
                 lambda a, c: os.environ.get(a["name"], "<unset>"), [("name", str)]),
            Tool("where", "The server's cwd, pid and process group.", self._where, returns=dict),
            Tool("spawn_child", "Start a grandchild process that sleeps; returns its pid.",
                 self._spawn_child, returns=int),
        ]
        for i in range(FILLERS):
            self.tools.append(Tool(f"filler_{i}", f"Filler tool {i}.",
                                   lambda a, c, i=i: f"filler {i}", title="filler"))
        self._knobs()
        if features.enabled():
            features.install(self, Tool)

    def _knobs(self):
        """The attack knobs of the module docstring."""
        if os.environ.get("MCP_FAKE_MANY"):
            self.tools.append(Tool("big", "Answer with this many bytes of text.",
                                   lambda a, c: "x" * a["size"], [("size", int)], returns=None))
            self.tools.append(Tool("env_error", "Answer an error quoting a variable's value.",
                                   self._env_error, [("name", str)], returns=None))
            for i in range(int(os.environ["MCP_FAKE_MANY"])):
                self.tools.append(Tool(f"many_{i}", f"Many tool {i}.",
                                       lambda a, c, i=i: f"many {i}", returns=None))
        for definition in json.loads(os.environ.get("MCP_FAKE_TOOLS") or "[]"):
            tool = Tool(definition["name"], "", lambda a, c, n=definition["name"]: f"raw {n}",
                        returns=None)
            tool.schema = definition
            self.tools.append(tool)

    # -- tools
    @staticmethod
    def _env_error(args, ctx):
        raise RpcFailed(f"bad credentials {os.environ.get(args['name'])}\x1b[31m red")

    @staticmethod
    def _fail(args, ctx):
        raise ToolFailed(args["message"])

    @staticmethod
    def _crash(args, ctx):
        sys.stderr.write("boom: crashing on purpose\n")
        sys.stderr.flush()
        os._exit(3)

    @staticmethod
    def _slow(args, ctx):
        seconds = args["seconds"]
        if ctx.cancel.wait(max(0.0, seconds)):
            raise Cancelled()
        return f"slept {seconds!r}"

    def _garbage(self, args, ctx):
        ctx.raw(b"this is not json\n\xff\xfe not utf-8\n[1, 2]\n{\"jsonrpc\": \"2.0\"}\n")
        return "garbage sent"

    def _grow(self, args, ctx):
        with self.lock:
            if not any(t.name == "extra" for t in self.tools):
                self.tools.append(Tool("extra", "Added by grow.", lambda a, c: "extra here",
                                       returns=None, title="<lambda>"))
        ctx.notify({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        return "grown"

    @staticmethod
    def _picture(args, ctx):
        return [{"text": "a pixel", "type": "text"},
                {"data": PIXEL, "mimeType": "image/png", "type": "image"}]

    @staticmethod
    def _where(args, ctx):
        return {"cwd": os.getcwd(), "pid": os.getpid(), "pgid": os.getpgid(0)}

    @staticmethod
    def _spawn_child(args, ctx):
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        return child.pid

    # -- protocol
    def handle(self, message, ctx):
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return None
        method, rid = message.get("method"), message.get("id")
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        if method is None:
            features.answered(self, message)  # a response to one of our requests, or nothing
            return None
        if "id" not in message:
            if method == "notifications/cancelled":
                event = self.inflight.get(params.get("requestId"))
                if event is not None:
                    event.set()
            return None
        if method == "initialize":
            asked = params.get("protocolVersion")
            result = {"capabilities": {"prompts": {"listChanged": features.enabled()},
                                       "resources": {"listChanged": False, "subscribe": False},
                                       "tools": {"listChanged": False}},
                      "protocolVersion": asked if asked in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE,
                      "serverInfo": {"name": SERVER_NAME, "version": ""}}
        elif method == "ping":
            result = {}
        elif method == "tools/list":
            with self.lock:
                tools = [t.schema for t in self.tools]
            cursor = params.get("cursor")
            start = int(cursor) if cursor else 0
            result = {}
            if start + PAGE < len(tools):
                result["nextCursor"] = str(start + PAGE)
            result["tools"] = tools[start:start + PAGE]
        elif method == "tools/call":
            ctx.cancel = self.inflight[rid] = threading.Event()
            try:
                result = self.call(params, ctx)
            except Cancelled:
                return ctx.cancelled_answer(rid)
            except RpcFailed as exc:
                return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32603, "message": str(exc)}}
            finally:
                self.inflight.pop(rid, None)
            if ctx.cancel.is_set():
                return ctx.cancelled_answer(rid)
        else:
            try:
                result = features.handle(self, method, params) if features.enabled() else None
            except LookupError as exc:
                return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": str(exc)}}
            if result is None:
                return {"jsonrpc": "2.0", "id": rid,
                        "error": {"code": -32601, "message": "Method not found", "data": method}}
        return {"jsonrpc": "2.0", "id": rid, "result": result}

    def call(self, params, ctx):
        name = params.get("name")
        arguments = params.get("arguments") or {}
        with self.lock:
            tool = next((t for t in self.tools if t.name == name), None)
        if tool is None:
            return self._error(name, f"Unknown tool: {name}")
        try:
            values = tool.validate(arguments)
        except _Rejected as exc:
            sys.stderr.write(f"Tool {name!r} rejected arguments: {exc.names!r}\n")
            sys.stderr.flush()
            text = f"Error executing tool {name}: {exc}"
            return {"content": [{"text": text, "type": "text"}], "isError": True}
        try:
            value = tool.fn(values, ctx)
        except ToolFailed as exc:
            return self._error(name, f"Error executing tool {name}: {exc}")
        if tool.returns is list:
            return value if isinstance(value, dict) else {"content": value, "isError": False}
        if tool.returns is dict:
            return {"content": [{"text": json.dumps(value, indent=2), "type": "text"}], "isError": False}
        text = value if isinstance(value, str) else dumps(value)
        result = {"content": [{"text": text, "type": "text"}], "isError": False}
        if "outputSchema" in tool.schema:
            result["structuredContent"] = {"result": value}
        return result

    @staticmethod
    def _error(name, text):
        sys.stderr.write(f"Tool {name!r} failed: {text!r}\n")
        sys.stderr.flush()
        return {"content": [{"text": text, "type": "text"}], "isError": True}


class Ctx:
    def __init__(self, notify, raw=None, answer_cancelled=False, request=None):
        self.notify = notify
        self.request = request or notify  # a request to the client during a call
        self.raw = raw or (lambda data: None)
        self.cancel = threading.Event()
        self.answer_cancelled = answer_cancelled

    def cancelled_answer(self, rid):
        """A cancelled request: unanswered over stdio; over streamable HTTP the official
        server ends the request's event stream with a -32800 error."""
        if not self.answer_cancelled:
            return None
        return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32800, "message": "Request cancelled"}}


# ------------------------------------------------------------------ stdio
def serve_stdio(server):
    out_lock = threading.Lock()

    def write(data):
        with out_lock:
            os.write(1, data)

    def send(message):
        write(dumps(message).encode() + b"\n")

    def run(message):
        try:
            answer = server.handle(message, Ctx(send, write))
        except Exception as exc:  # noqa: BLE001 - never kill the server for one request
            answer = {"jsonrpc": "2.0", "id": message.get("id"),
                      "error": {"code": -32603, "message": str(exc)}}
        if answer is not None:
            send(answer)

    if os.environ.get("MCP_FAKE_IGNORE_EOF"):
        import signal

        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            continue  # the official server drops lines it cannot parse, unanswered
        if isinstance(message, dict) and message.get("method") == "tools/call" and "id" in message:
            threading.Thread(target=run, args=(message,), daemon=True).start()
        else:
            run(message)
    if os.environ.get("MCP_FAKE_IGNORE_EOF"):
        threading.Event().wait()  # a server that does not stop when its client goes
    if os.environ.get("MCP_FAKE_EOF_GATE"):
        hold_at_eof(os.environ["MCP_FAKE_EOF_GATE"])


def hold_at_eof(directory):
    """``MCP_FAKE_EOF_GATE=dir`` (with FIFOs ``dir/closing`` and ``dir/gate``): once its stdin
    ends, a server the test listens for (``closing`` open for reading) writes a byte there
    and stops only when the test writes to ``gate`` (SIGTERM ignored; the client's SIGKILL
    still ends it). With nobody listening it stops at once."""
    import select
    import signal

    gate = os.open(os.path.join(directory, "gate"), os.O_RDONLY | os.O_NONBLOCK)
    try:
        told = os.open(os.path.join(directory, "closing"), os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return  # ENXIO: no test listens (a later start of the server)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.write(told, b"x")
    os.close(told)
    select.select([gate], [], [])


# ------------------------------------------------------------------ HTTP
class Stream:
    """One open text/event-stream response (chunked)."""

    def __init__(self, handler):
        self.handler = handler
        self.lock = threading.Lock()
        self.closed = threading.Event()

    def write(self, data):
        with self.lock:
            if self.closed.is_set():
                return
            try:
                self.handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.handler.wfile.flush()
            except (OSError, ValueError):  # gone, or its handler ended
                self.closed.set()

    def event(self, message, event="message"):
        self.write(f"event: {event}\r\ndata: {message}\r\n\r\n".encode())

    def end(self):
        with self.lock:
            if not self.closed.is_set():
                self.closed.set()
                try:
                    self.handler.wfile.write(b"0\r\n\r\n")
                    self.handler.wfile.flush()
                except (OSError, ValueError):
                    pass


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""
    app = None  # set by main

    def log_message(self, *args):
        pass

    def version_string(self):
        return "uvicorn"

    def send_plain(self, status, body, kind="application/json", headers=()):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        if kind:
            self.send_header("content-type", kind)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def rpc_error(self, status, code, message, headers=()):
        self.send_plain(status, dumps({"jsonrpc": "2.0", "id": None,
                                       "error": {"code": code, "message": message}}),
                        headers=headers)

    def open_stream(self, kind, headers=()):
        self.send_response(200)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("content-type", kind)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        return Stream(self)

    def body(self):
        return self.rfile.read(int(self.headers.get("content-length") or 0))

    def do_GET(self):
        self.app.get(self)

    def do_POST(self):
        self.app.post(self)

    def do_DELETE(self):
        self.app.delete(self)

    def do_PUT(self):
        self.app.other(self)

    do_PATCH = do_PUT


class StreamableApp:
    PATH = "/mcp"

    def __init__(self, server):
        self.server = server
        self.sessions = {}  # id -> the GET Stream or None
        self.lock = threading.Lock()

    def _check_path(self, h):
        if urllib.parse.urlsplit(h.path).path.rstrip("/") != self.PATH:
            h.send_plain(404, "Not Found", "text/plain; charset=utf-8")
            return False
        return True

    def _session(self, h, fresh_id):
        """The request's session id when it is known; else answers and returns None."""
        sid = h.headers.get("mcp-session-id")
        if sid is None:
            h.rpc_error(400, -32600, "Bad Request: Missing session ID", [("mcp-session-id", fresh_id)])
            return None
        with self.lock:
            known = sid in self.sessions
        if not known:
            h.rpc_error(404, -32600, "Session not found")
            return None
        version = h.headers.get("mcp-protocol-version")
        if (version is not None or features.versions(None)) and version not in HANDSHAKE_VERSIONS:
            h.rpc_error(400, -32600, f"Bad Request: Unsupported protocol version: {version}",
                        [("mcp-session-id", sid)])
            return None
        return sid

    def post(self, h):
        if not self._check_path(h):
            return
        data = h.body()
        fresh = os.environ.get("MCP_FAKE_SESSION_ID") or uuid.uuid4().hex
        accept = h.headers.get("accept") or ""
        if "application/json" not in accept or "text/event-stream" not in accept:
            h.rpc_error(406, -32600, "Not Acceptable: Client must accept both application/json "
                                     "and text/event-stream", [("mcp-session-id", fresh)])
            return
        if not (h.headers.get("content-type") or "").lower().startswith("application/json"):
            h.send_plain(400, "Invalid Content-Type header", kind=None)
            return
        try:
            message = json.loads(data)
        except ValueError as exc:
            h.rpc_error(400, -32700, f"Parse error: {exc}", [("mcp-session-id", fresh)])
            return
        if isinstance(message, dict) and message.get("method") == "initialize":
            sid = fresh
            with self.lock:
                self.sessions[sid] = None
        else:
            sid = self._session(h, fresh)
            if sid is None:
                return
        if not isinstance(message, dict) or "id" not in message or "method" not in message:
            h.send_plain(202, b"", headers=[("mcp-session-id", sid)])
            self.server.handle(message, Ctx(lambda m: None))
            return
        if os.environ.get("MCP_FAKE_JSON"):  # the SDK's json_response mode
            answer = self.server.handle(message, Ctx(lambda m: None))
            h.send_plain(200, dumps(answer), headers=[("mcp-session-id", sid)])
            return
        stream = h.open_stream("text/event-stream", [
            ("cache-control", "no-cache, no-transform"), ("connection", "keep-alive"),
            ("mcp-session-id", sid), ("x-accel-buffering", "no")])

        def notify(note):
            with self.lock:
                get = self.sessions.get(sid)
            if get is not None:
                get.event(dumps(note))

        answer = self.server.handle(message, Ctx(notify, answer_cancelled=True,
                                                 request=lambda m: stream.event(dumps(m))))
        if answer is not None:
            stream.event(dumps(answer))
        stream.end()

    def get(self, h):
        if not self._check_path(h):
            return
        if "text/event-stream" not in (h.headers.get("accept") or ""):
            h.rpc_error(406, -32600, "Not Acceptable: Client must accept text/event-stream",
                        [("mcp-session-id", uuid.uuid4().hex)])
            return
        sid = self._session(h, uuid.uuid4().hex)
        if sid is None:
            return
        with self.lock:
            busy = self.sessions.get(sid) is not None
        if busy:
            h.rpc_error(409, -32600, "Conflict: Only one SSE stream is allowed per session",
                        [("mcp-session-id", sid)])
            return
        stream = h.open_stream("text/event-stream", [
            ("cache-control", "no-cache, no-transform"), ("connection", "keep-alive"),
            ("mcp-session-id", sid), ("x-accel-buffering", "no")])
        with self.lock:
            self.sessions[sid] = stream
        _hold(h, stream)
        with self.lock:
            if self.sessions.get(sid) is stream:
                self.sessions[sid] = None
        h.close_connection = True

    def delete(self, h):
        if not self._check_path(h):
            return
        sid = self._session(h, uuid.uuid4().hex)
        if sid is None:
            return
        with self.lock:
            stream = self.sessions.pop(sid, None)
        if stream is not None:
            stream.end()
        h.send_plain(200, b"", headers=[("mcp-session-id", sid)])

    def other(self, h):
        if not self._check_path(h):
            return
        h.rpc_error(405, -32600, "Method Not Allowed",
                    [("allow", "GET, POST, DELETE"), ("mcp-session-id", uuid.uuid4().hex)])


def _hold(h, stream, ping=None):
    """Keep a GET stream open until it is ended or the client goes away."""
    h.connection.settimeout(None)
    while not stream.closed.wait(ping or SSE_PING):
        if ping is not None:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
            stream.write(f": ping - {stamp}.000000+00:00\r\n\r\n".encode())
        else:
            try:  # a client that went away shows as a readable, empty socket
                h.connection.setblocking(False)
                try:
                    if h.connection.recv(1, socket.MSG_PEEK) == b"":
                        return
                except BlockingIOError:
                    pass
                finally:
                    h.connection.setblocking(True)
            except OSError:
                return


class SseApp:
    def __init__(self, server):
        self.server = server
        self.sessions = {}
        self.lock = threading.Lock()

    def get(self, h):
        if urllib.parse.urlsplit(h.path).path != "/sse":
            h.send_plain(404, "Not Found", "text/plain; charset=utf-8")
            return
        sid = uuid.uuid4().hex
        stream = h.open_stream("text/event-stream; charset=utf-8", [
            ("cache-control", "no-store"), ("connection", "keep-alive"), ("x-accel-buffering", "no")])
        stream.queue = queue.Queue()
        worker = threading.Thread(target=self._work, args=(stream,), daemon=True)
        worker.start()
        with self.lock:
            self.sessions[sid] = stream
        endpoint = os.environ.get("MCP_FAKE_ENDPOINT") or "/messages/?session_id={sid}"
        stream.event(endpoint.format(sid=sid), "endpoint")
        _hold(h, stream, SSE_PING)
        with self.lock:
            self.sessions.pop(sid, None)
        stream.queue.put(None)
        h.close_connection = True

    def post(self, h):
        parts = urllib.parse.urlsplit(h.path)
        if parts.path != "/messages/":
            h.send_plain(404, "Not Found", "text/plain; charset=utf-8")
            return
        data = h.body()
        sid = urllib.parse.parse_qs(parts.query).get("session_id", [None])[0]
        if sid is None:
            h.send_plain(400, "session_id is required", kind=None)
            return
        try:
            sid = uuid.UUID(hex=sid).hex
        except ValueError:
            h.send_plain(400, "Invalid session ID", kind=None)
            return
        with self.lock:
            stream = self.sessions.get(sid)
        if stream is None:
            h.send_plain(404, "Could not find session", kind=None)
            return
        try:
            message = json.loads(data)
        except ValueError:
            h.send_plain(400, "Could not parse message", kind=None)
            return
        h.send_plain(202, "Accepted", kind=None)
        if not isinstance(message, dict) or "id" not in message:
            self.server.handle(message, Ctx(lambda m: None))  # cancelled: at once
        else:
            stream.queue.put(message)

    def _work(self, stream):
        """One session's requests in arrival order, as the official server answers them;
        ``slow`` runs aside so that a later request or its cancellation is not held up."""
        def run(message):
            answer = self.server.handle(message, Ctx(lambda m: stream.event(dumps(m))))
            if answer is not None:
                stream.event(dumps(answer))

        while True:
            message = stream.queue.get()
            if message is None:
                return
            if message.get("method") == "tools/call" and \
                    (message.get("params") or {}).get("name") == "slow":
                threading.Thread(target=run, args=(message,), daemon=True).start()
            else:
                run(message)

    def delete(self, h):
        h.send_plain(405, "Method Not Allowed", "text/plain; charset=utf-8")

    other = delete


def serve_http(app):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
    httpd.daemon_threads = True
    httpd.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    socketserver.TCPServer.server_bind(httpd)  # not HTTPServer's: no getfqdn lookup
    httpd.server_name, httpd.server_port = "127.0.0.1", httpd.server_address[1]
    httpd.server_activate()
    if os.environ.get("MCP_FAKE_TLS"):  # "cert.pem:key.pem": serve https
        import ssl

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*os.environ["MCP_FAKE_TLS"].split(":", 1))
        httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    Handler.app = app
    print(f"PORT {httpd.server_address[1]}", flush=True)
    httpd.serve_forever()


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    server = Server()
    if mode == "stdio":
        serve_stdio(server)
    elif mode == "http":
        serve_http(StreamableApp(server))
    elif mode == "sse":
        serve_http(SseApp(server))
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
    for _stream in (sys.stdout, sys.stderr):
        try:
            _stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(0)
