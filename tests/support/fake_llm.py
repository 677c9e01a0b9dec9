"""Fake OpenAI-compatible and Anthropic-compatible HTTP servers for provider tests.

One :class:`FakeLLMServer` serves both ``/v1/chat/completions`` and ``/v1/messages`` on
127.0.0.1 with an ephemeral port, from a per-test script: each incoming request takes
the next queued response. Responses are :class:`SSE` streams (HTTP/1.1 chunked, so a
dropped connection is visible to the client as a truncated body) or :class:`Status`
replies. An SSE stream can *hold* after some events until the test releases it or the
client disconnects, which makes mid-stream cancellation deterministic; it records the
disconnect in ``disconnected``. Every request body is recorded for assertions.

The server runs in gevent greenlets (``gevent.server.StreamServer``); tests run under
the monkey-patched runtime. All waits are bounded.
"""

import collections
import hashlib
import json
import socket
from dataclasses import dataclass, field

import gevent
from gevent.event import Event
from gevent.pool import Pool
from gevent.server import StreamServer

HOLD_LIMIT = 10.0  # seconds a held stream waits for a release or a disconnect
REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
           404: "Not Found", 429: "Too Many Requests", 500: "Internal Server Error",
           503: "Service Unavailable"}


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict
    body: bytes

    @property
    def json(self):
        return json.loads(self.body)


@dataclass
class Status:
    """A plain JSON reply (errors, rate limits)."""

    code: int
    body: object = None
    headers: dict = field(default_factory=dict)


class Hangup:
    """Close the connection without answering (a reset before any response byte)."""


class Stall:
    """Read the request, never answer; ``disconnected`` is set when the client hangs up
    (a model that takes long before its first token)."""

    def __init__(self):
        self.reached = Event()
        self.disconnected = Event()


class SSE:
    """A server-sent-event stream: ``events`` is a list of ``(event_name | None, data)``.

    ``drop_after=n`` closes the socket after n events without ending the body;
    ``hold_after=n`` pauses after n events until :meth:`release` or a client disconnect;
    ``close_after=True`` closes the kept-alive connection after the body (a stale
    keep-alive connection for the client's next request).
    """

    def __init__(self, events, drop_after=None, hold_after=None, close_after=False, kind=None):
        self.events = list(events)
        self.kind = kind  # "chat", "responses", "anthropic"... (what the stream answers)
        self.drop_after = drop_after
        self.hold_after = hold_after
        self.close_after = close_after  # end the connection silently after a complete body
        self.reached = Event()  # set when a held stream reaches its hold point
        self.released = Event()
        self.disconnected = Event()  # set when the client dropped a held stream

    def release(self):
        self.released.set()


class Raw:
    """A 200 body of other framing than SSE (AWS's binary event stream): ``parts`` are
    written as HTTP chunks in order, with ``content_type``."""

    def __init__(self, parts, content_type):
        self.parts, self.content_type = list(parts), content_type


class Burst:
    """``count`` copies of one SSE event written back to back with no pause (a fast local
    server), in large HTTP chunks; then the stream holds open until the client disconnects
    (so only a cancel can end the turn). ``written`` is set once the whole burst is sent."""

    def __init__(self, name, data, count, block=1000):
        self.event = _event_bytes(name, data)
        self.count = count
        self.block = block
        self.written = Event()
        self.disconnected = Event()


class FakeLLMServer:
    """``tls``: an ``ssl.SSLContext`` to serve HTTPS with; ``host`` goes into the URLs
    (e.g. a name only a proxy resolves)."""

    def __init__(self, tls=None, host="127.0.0.1"):
        self.requests = []
        self.connections = 0  # accepted connections (keep-alive reuse shows as fewer)
        self.host = host
        self._scheme = "https" if tls else "http"
        self._script = collections.deque()
        self.defaults = {}  # path -> factory of the response when the script is empty
        self.models = None  # model ids GET /models lists (None: 404, as many servers do)
        self.listings = []  # GET /models requests (kept apart from ``requests``)
        # A session's title request (term2acp/sessions/titles.py) is kept apart too, in
        # ``title_requests``, and answered with ``title`` (a string; or a response object;
        # None: a 400, so the session keeps the user's words), never with a scripted reply.
        self.title = None
        self.title_requests = []
        self.responder = None  # callable(Recorded) -> response, when the script is empty
        # (chars, over_system): chat requests whose message content (system included) is
        # over max(chars, system + over_system) get OpenAI's context_length_exceeded 400
        self.context_limit = None
        self.refused = []  # requests refused for the context limit
        # POST .../responses: True served, False 404 (a server without the Responses API),
        # None: served when the next scripted reply is a Responses stream
        self.responses = None
        self.no_route = []  # requests answered 404 for a route the server lacks
        self.routes = {}  # path -> callable(Recorded) -> response, before the script
        self.routed = []  # the requests the routes answered
        self._arrived = Event()
        self._tls = tls
        self._connections = Pool(64)  # so stop() can end kept-alive connections
        self._server = StreamServer(("127.0.0.1", 0), self._handle, spawn=self._connections)

    def start(self):
        self._server.start()
        return self

    def stop(self):
        self._server.stop(timeout=0)  # a client's idle keep-alive connection never ends itself

    @property
    def port(self):
        return self._server.server_port

    @property
    def root_url(self):
        return f"{self._scheme}://{self.host}:{self.port}"

    @property
    def openai_url(self):
        return self.root_url + "/v1"

    def enqueue(self, *responses):
        self._script.extend(responses)

    def wait_requests(self, count, timeout=5.0):
        with gevent.Timeout(timeout):
            while len(self.requests) < count:
                self._arrived.clear()
                self._arrived.wait()
        return self.requests[:count]

    # ------------------------------------------------------------ connection handling
    def _handle(self, sock, _address):
        self.connections += 1
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as real API servers do
        if self._tls is not None:
            try:
                sock = self._tls.wrap_socket(sock, server_side=True)
            except OSError:  # the client refused our certificate
                sock.close()
                return
        reader = sock.makefile("rb")
        try:
            while True:
                request = _read_request(reader)
                if request is None:
                    return
                if request.method == "GET" and request.path.split("?")[0].endswith("/models"):
                    self.listings.append(request)  # model listings never take a scripted reply
                    if not self._respond(sock, self._models_reply(request)):
                        return
                    continue
                if is_title_request(request):
                    self.title_requests.append(request)
                    if not self._respond(sock, self._title_reply(request)):
                        return
                    continue
                route = self.routes.get(request.path.split("?")[0])
                if route is not None:
                    self.routed.append(request)
                    if not self._respond(sock, route(request)):
                        return
                    continue
                if self._lacks(request):
                    self.no_route.append(request)
                    if not self._respond(sock, Status(404, {"error": {
                            "message": f"Not Found: {request.path}"}})):
                        return
                    continue
                self.requests.append(request)
                self._arrived.set()
                response = self._over_limit(request) or self._next_response(request.path, request)
                if not self._respond(sock, response):
                    return
        except OSError:
            return
        finally:
            reader.close()
            sock.close()

    def _lacks(self, request):
        if request.method != "POST" or not request.path.split("?")[0].endswith("/responses"):
            return False
        if self.responses is not None:
            return not self.responses
        return getattr(self._script[0] if self._script else None, "kind", None) != "responses"

    def _over_limit(self, request):
        if self.context_limit is None or not request.path.endswith("/chat/completions"):
            return None
        size, system = chat_content_size(request.json)
        chars, over_system = self.context_limit
        limit = max(chars, system + over_system)
        request.content_chars, request.limit = size, limit
        if size <= limit:
            return None
        self.refused.append(request)
        return Status(400, {"error": {
            "message": f"This model's maximum context length is {limit // 4} tokens. However, "
                       f"your messages resulted in {size // 4} tokens. Please reduce the length "
                       "of the messages.",
            "type": "invalid_request_error", "param": "messages",
            "code": "context_length_exceeded"}})

    def _next_response(self, path, request=None):
        if self._script:
            return self._script.popleft()
        if self.responder is not None and request is not None:
            return self.responder(request)
        factory = self.defaults.get(path)
        if factory is not None:
            return factory()
        return Status(400, {"error": {"message": "fake server: no scripted response left"}})

    def _title_reply(self, request):
        if self.title is None:
            return Status(400, {"error": {"message": "fake server: no title in this test"}})
        if not isinstance(self.title, str):
            return self.title  # a response object, e.g. a Stall
        if request.path.endswith("/messages"):
            return anthropic_sse(an_start(), an_text(0, self.title), an_end("end_turn"))
        return openai_sse(oa_text(self.title), oa_finish("stop"))

    def _models_reply(self, request):
        if self.models is None:
            return Status(404, {"error": {"message": "no model listing here"}})
        if "/publishers/" in request.path:  # Vertex AI's Model Garden, one publisher's
            publisher = request.path.split("/publishers/")[1].split("/")[0]
            family = {"google": "gemini-", "anthropic": "claude-"}.get(publisher, "")
            return Status(200, {"publisherModels": [
                {"name": f"publishers/{publisher}/models/{model}"} for model in self.models
                if model.startswith(family)]})
        if "x-goog-api-key" in request.headers:  # Gemini's shape
            return Status(200, {"models": [
                {"name": f"models/{model}", "displayName": model,
                 "supportedGenerationMethods": ["generateContent", "countTokens"]}
                for model in self.models] + [
                {"name": "models/text-embedding-004",
                 "supportedGenerationMethods": ["embedContent"]}]})
        if "anthropic-version" in request.headers:  # Anthropic's shape (one page)
            return Status(200, {"data": [
                {"type": "model", "id": model, "display_name": model,
                 "created_at": "2026-11-01T00:00:00Z"} for model in self.models],
                "has_more": False, "first_id": self.models[0] if self.models else None,
                "last_id": self.models[-1] if self.models else None})
        return Status(200, {"object": "list", "data": [
            {"id": model, "object": "model", "owned_by": "fake"} for model in self.models]})

    def _respond(self, sock, response):
        """Send one response; False when the connection must end."""
        if isinstance(response, Hangup):
            sock.shutdown(socket.SHUT_RDWR)
            return False
        if isinstance(response, Burst):
            return _burst(sock, response)
        if isinstance(response, Stall):
            response.reached.set()
            with gevent.Timeout(HOLD_LIMIT, False):
                _watch_disconnect(sock, response.disconnected)
            return False
        if isinstance(response, Raw):
            sock.sendall(_head(200, {"Content-Type": response.content_type,
                                     "Transfer-Encoding": "chunked"}))
            for part in response.parts:
                sock.sendall(_chunk(part))
            sock.sendall(b"0\r\n\r\n")
            return True
        if isinstance(response, Status):
            body = json.dumps(response.body).encode() if response.body is not None else b""
            headers = {"Content-Type": "application/json", "Content-Length": str(len(body)),
                       **response.headers}
            sock.sendall(_head(response.code, headers) + body)
            return True
        sock.sendall(_head(200, {"Content-Type": "text/event-stream",
                                 "Transfer-Encoding": "chunked"}))
        for number, (name, data) in enumerate(response.events):
            if number == response.drop_after:
                sock.shutdown(socket.SHUT_RDWR)
                return False
            if number == response.hold_after and not _hold(sock, response):
                return False
            sock.sendall(_chunk(_event_bytes(name, data)))
        sock.sendall(b"0\r\n\r\n")
        return not response.close_after


def _burst(sock, burst):
    sock.sendall(_head(200, {"Content-Type": "text/event-stream",
                             "Transfer-Encoding": "chunked"}))
    blocks, rest = divmod(burst.count, burst.block)
    body = (_chunk(burst.event * burst.block) * blocks
            + (_chunk(burst.event * rest) if rest else b""))
    try:
        sock.sendall(body)  # one call: the kernel refills the socket as fast as it drains
    except OSError:
        burst.disconnected.set()
        return False
    burst.written.set()
    with gevent.Timeout(HOLD_LIMIT, False):
        _watch_disconnect(sock, burst.disconnected)
    return False


def _hold(sock, response):
    """Wait for a release or the client's disconnect; True to continue streaming."""
    watcher = gevent.spawn(_watch_disconnect, sock, response.disconnected)
    response.reached.set()
    try:
        gevent.wait([response.released, response.disconnected], count=1, timeout=HOLD_LIMIT)
    finally:
        watcher.kill()
    return not response.disconnected.is_set() and response.released.is_set()


def _watch_disconnect(sock, disconnected):
    try:
        data = sock.recv(1)
    except OSError:
        data = b""
    if not data:
        disconnected.set()


def _read_request(reader):
    line = reader.readline()
    if not line:
        return None
    method, path, _version = line.decode("latin-1").split(" ", 2)
    headers = {}
    while True:
        line = reader.readline().decode("latin-1").strip()
        if not line:
            break
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    body = reader.read(int(headers.get("content-length", "0")))
    return Recorded(method, path, headers, body)


def _head(code, headers):
    lines = [f"HTTP/1.1 {code} {REASONS.get(code, 'Status')}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _chunk(payload):
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _event_bytes(name, data):
    text = data if isinstance(data, str) else json.dumps(data)
    prefix = f"event: {name}\n" if name else ""
    return f"{prefix}data: {text}\n\n".encode()


TITLE_SYSTEM = "Write a short title"  # how term2acp/sessions/titles.py's request begins


def is_title_request(request):
    try:
        body = request.json
    except ValueError:
        return False
    if not isinstance(body, dict):
        return False
    system = body.get("system", body.get("instructions"))  # Anthropic; OpenAI Responses
    if isinstance(body.get("systemInstruction"), dict):  # Gemini
        system = body["systemInstruction"].get("parts")
    if isinstance(system, list):
        system = " ".join(p.get("text", "") for p in system if isinstance(p, dict))
    if system is None:  # OpenAI: the first message
        first = (body.get("messages") or [{}])[0]
        system = first.get("content") if first.get("role") in ("system", "developer") else ""
        if isinstance(system, list):
            system = " ".join(p.get("text", "") for p in system if isinstance(p, dict))
    return isinstance(system, str) and system.startswith(TITLE_SYSTEM)


def chat_content_size(body):
    """``(characters of all message content, characters of the system prompt)`` of a
    chat completions request (text parts of list contents count too)."""
    size = system = 0
    for message in body.get("messages") or ():
        content = message.get("content")
        if isinstance(content, list):
            length = sum(len(p.get("text") or "") for p in content if isinstance(p, dict))
        else:
            length = len(content or "")
        size += length
        if message.get("role") == "system":
            system += length
    return size, system


# ---------------------------------------------------------------- OpenAI chunks
def oa_chunk(delta=None, finish=None, usage=None, choices=True):
    body = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1,
            "model": "fake-model", "choices": []}
    if choices:
        body["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    if usage is not None:
        body["usage"] = usage
    return body


def oa_text(text):
    return oa_chunk({"role": "assistant", "content": text})


def oa_reasoning(text, key="reasoning_content"):
    return oa_chunk({key: text})


def oa_tool(index, call_id=None, name=None, args=None):
    function = {k: v for k, v in (("name", name), ("arguments", args)) if v is not None}
    call = {"index": index, "function": function}
    if call_id:
        call.update(id=call_id, type="function")
    return oa_chunk({"tool_calls": [call]})


def oa_finish(reason):
    return oa_chunk({}, finish=reason)


def oa_usage(prompt, completion, reasoning=0, cached=0):
    return oa_chunk(choices=False, usage={
        "prompt_tokens": prompt, "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "completion_tokens_details": {"reasoning_tokens": reasoning},
        "prompt_tokens_details": {"cached_tokens": cached}})


def openai_sse(*chunks, done=True, **options):
    events = [(None, chunk) for chunk in chunks] + ([(None, "[DONE]")] if done else [])
    return SSE(events, **options)


# ---------------------------------------------------------------- Anthropic events
def an_start(input_tokens=10, cache_read=0, cache_write=0):
    usage = {"input_tokens": input_tokens, "output_tokens": 1,
             "cache_read_input_tokens": cache_read, "cache_creation_input_tokens": cache_write}
    return [{"type": "message_start", "message": {
        "id": "msg_fake", "type": "message", "role": "assistant", "model": "fake-model",
        "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}}]


def _block(index, start, deltas):
    events = [{"type": "content_block_start", "index": index, "content_block": start}]
    events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
    return events + [{"type": "content_block_stop", "index": index}]


def an_text(index, *parts):
    return _block(index, {"type": "text", "text": ""},
                  [{"type": "text_delta", "text": p} for p in parts])


def an_thinking(index, *parts, signature="sig-fake"):
    deltas = [{"type": "thinking_delta", "thinking": p} for p in parts]
    return _block(index, {"type": "thinking", "thinking": "", "signature": ""},
                  deltas + [{"type": "signature_delta", "signature": signature}])


def an_tool(index, call_id, name, *json_parts):
    return _block(index, {"type": "tool_use", "id": call_id, "name": name, "input": {}},
                  [{"type": "input_json_delta", "partial_json": p} for p in json_parts])


def an_search(index, search_id, query):
    """A web search the server runs: a ``server_tool_use`` block, its input streamed as
    ``input_json`` deltas (an empty one first), as the API does."""
    text = json.dumps({"query": query})
    parts = ("", text[:len(text) // 2], text[len(text) // 2:])
    return _block(index, {"type": "server_tool_use", "id": search_id, "name": "web_search",
                          "input": {}},
                  [{"type": "input_json_delta", "partial_json": p} for p in parts])


def an_search_result(index, search_id, results=(), error=None):
    """The search's ``web_search_tool_result`` block, whole in its start event (no deltas):
    ``results`` as ``(url, title)`` pairs, each with its opaque ``encrypted_content`` and
    ``page_age``; or ``error``: a ``web_search_tool_result_error``'s code."""
    if error is not None:
        content = {"type": "web_search_tool_result_error", "error_code": error}
    else:
        content = [{"type": "web_search_result", "url": url, "title": title,
                    "encrypted_content": "Eqgf" + hashlib.sha256(url.encode()).hexdigest(),
                    "page_age": "April 30, 2026"} for url, title in results]
    return _block(index, {"type": "web_search_tool_result", "tool_use_id": search_id,
                          "content": content}, [])


def an_cited_text(index, text, url, title):
    """A text block citing a search result: its ``citations_delta`` before its text."""
    citation = {"type": "web_search_result_location", "url": url, "title": title,
                "encrypted_index": "Eo8BCioIAhgBIiQyYjQ", "cited_text": text[:40]}
    return _block(index, {"type": "text", "text": ""},
                  [{"type": "citations_delta", "citation": citation},
                   {"type": "text_delta", "text": text}])


def an_end(stop_reason="end_turn", output_tokens=5, thinking_tokens=None, searches=None):
    usage = {"output_tokens": output_tokens}
    if thinking_tokens is not None:
        usage["output_tokens_details"] = {"thinking_tokens": thinking_tokens}
    if searches is not None:
        usage["server_tool_use"] = {"web_search_requests": searches}
    return [{"type": "message_delta", "usage": usage,
             "delta": {"stop_reason": stop_reason, "stop_sequence": None}},
            {"type": "message_stop"}]


def anthropic_sse(*groups, **options):
    """``groups``: event lists from the ``an_*`` builders, single event dicts, or raw
    ``(event_name, data)`` tuples (data may be a malformed string)."""
    events = []
    for group in groups:
        if isinstance(group, tuple):
            events.append(group)
            continue
        for event in [group] if isinstance(group, dict) else group:
            events.append((event["type"], event))
    return SSE(events, **options)


# ---------------------------------------------------------------- client side
def closed_port():
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Consumer:
    """Drains a provider stream in its own greenlet, like the turn greenlet does."""

    def __init__(self, stream):
        self.events = []
        self.first = Event()
        self.greenlet = gevent.spawn(self._run, stream)

    def _run(self, stream):
        for event in stream:
            self.events.append(event)
            self.first.set()


# ---------------------------------------------------------------- a producer on a native thread
class NativeBurstServer:
    """Serves one :class:`Burst` from a native OS thread with blocking sockets.

    A producer in the test's own gevent hub cannot outrun the consumer (it only writes when
    the consumer yields); this one refills the socket while the consumer works, as a fast
    server in another process does, so a read loop that never yields really starves the hub.
    """

    def __init__(self, burst):
        from gevent import monkey

        self.burst = burst
        self.written = False  # the whole burst is in the socket (set by the thread)
        self.disconnected = False  # the client closed the connection (set by the thread)
        real_socket = monkey.get_original("socket", "socket")
        self._listener = real_socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(1)
        self._listener.settimeout(HOLD_LIMIT)
        self._start_thread = monkey.get_original("_thread", "start_new_thread")
        self._done = monkey.get_original("_thread", "allocate_lock")()
        self.port = self._listener.getsockname()[1]
        self.openai_url = f"http://127.0.0.1:{self.port}/v1"

    def start(self):
        self._done.acquire()
        self._start_thread(self._serve, ())
        return self

    def stop(self):
        """Wait (bounded, without blocking the hub) for the thread to finish."""
        with gevent.Timeout(HOLD_LIMIT + 1, False):
            while not self._done.acquire(False):
                gevent.sleep(0.01)
        self._listener.close()

    def _serve(self):
        try:
            self._serve_one()
        finally:
            # accept() wraps the connection in the (patched) socket class, which made a
            # hub for this thread: its loop's descriptors go with the thread
            from gevent._hub_local import get_hub_if_exists

            hub = get_hub_if_exists()
            if hub is not None:
                hub.destroy(destroy_loop=True)
            self._done.release()

    def _serve_one(self):
        """Accept connections until one POST got the burst; anything else (a model listing
        GET, a Responses API request: a chat-only server) gets a 404 and its connection
        closed."""
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(HOLD_LIMIT)
                try:
                    data = b""
                    while b"\r\n\r\n" not in data:  # the request head; the body is not needed
                        more = conn.recv(65536)
                        if not more:
                            break
                        data += more
                    if not data.startswith(b"POST ") or data.split(b" ", 2)[1].endswith(
                            b"/responses"):
                        conn.sendall(_head(404, {"Content-Length": "0", "Connection": "close"}))
                        continue
                    self._send_burst(conn)
                except OSError:
                    pass
                self.disconnected = True
                return

    def _send_burst(self, conn):
        burst = self.burst
        blocks, rest = divmod(burst.count, burst.block)
        conn.sendall(_head(200, {"Content-Type": "text/event-stream",
                                 "Transfer-Encoding": "chunked"}))
        conn.sendall(_chunk(burst.event * burst.block) * blocks
                     + (_chunk(burst.event * rest) if rest else b""))
        self.written = True
        while conn.recv(65536):  # hold until the client goes away
            pass

    def wait_disconnected(self, timeout):
        with gevent.Timeout(timeout, False):
            while not self.disconnected:
                gevent.sleep(0.01)
        return self.disconnected
