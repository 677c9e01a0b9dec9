"""The providers' HTTP client (providers/http.py over term2acp/net/) against local fakes:
TLS with a CA made at test time, a CONNECT proxy, retries, typed errors, keep-alive, cancel.
"""

import base64

import gevent
import pytest

from term2acp.net import address as net
from term2acp.providers.base import ModelRequest, Retrying, Stop, TextDelta
from term2acp.providers.errors import (
    AuthenticationFailed,
    ConnectionFailed,
    ContextOverflow,
    ProviderHTTPError,
    RateLimited,
)
from term2acp.providers.anthropic import AnthropicProvider
from term2acp.providers.openai import OpenAIProvider
from term2acp.net.sse import SSEDecoder
from tests.support.fake_llm import (
    Burst,
    Consumer,
    FakeLLMServer,
    Hangup,
    NativeBurstServer,
    Stall,
    Status,
    oa_finish,
    oa_text,
    openai_sse,
)
from tests.support.proxy import ConnectProxy
from tests.support.tls import make_ca, server_context

KEY = "sk-test-0123456789abcdef"
PROXY_ENV = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy",
             "NO_PROXY", "no_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE")
NAME = "api.fake.test"  # a name only the proxy resolves


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in PROXY_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def authority(tmp_path_factory):
    return make_ca(tmp_path_factory.mktemp("ca"), names=[NAME])


@pytest.fixture
def server():
    srv = FakeLLMServer().start()
    yield srv
    srv.stop()


@pytest.fixture
def tls_server(authority):
    srv = FakeLLMServer(tls=server_context(authority)).start()
    yield srv
    srv.stop()


@pytest.fixture
def proxy():
    made = ConnectProxy(hosts={NAME: "127.0.0.1"}).start()
    yield made
    made.stop()


def ask():
    return ModelRequest(model="m", system="", messages=[{"role": "user", "content": "hi"}])


def run(base_url, **kwargs):
    kwargs.setdefault("max_retries", 0)
    kwargs.setdefault("api", "chat")  # the transport under test, not the API's choice
    with gevent.Timeout(10):
        return list(OpenAIProvider(api_key=KEY, base_url=base_url, **kwargs).stream(ask()))


def answer():
    return openai_sse(oa_text("secure"), oa_finish("stop"))


# ---------------------------------------------------------------- TLS
@pytest.mark.parametrize("variable", ["SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"])
def test_tls_verifies_against_the_configured_ca(tls_server, authority, monkeypatch, variable):
    monkeypatch.setenv(variable, str(authority.ca))
    tls_server.enqueue(answer())
    assert run(tls_server.openai_url) == [TextDelta("secure"), Stop("end_turn")]
    assert tls_server.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_tls_refuses_an_unknown_ca_without_retrying(tls_server):
    tls_server.enqueue(answer())
    with pytest.raises(ConnectionFailed) as caught:
        run(tls_server.openai_url, max_retries=2)
    text = str(caught.value)
    assert text.startswith(f"openai: cannot reach {tls_server.openai_url}/chat/completions: ")
    assert "certificate verification failed" in text and "SSL_CERT_FILE" in text
    assert tls_server.connections == 1 and not tls_server.requests


def test_tls_checks_the_host_name(authority, monkeypatch):
    monkeypatch.setenv("SSL_CERT_FILE", str(authority.ca))
    proxy = ConnectProxy(hosts={"other.fake.test": "127.0.0.1"}).start()
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    srv = FakeLLMServer(tls=server_context(authority), host="other.fake.test").start()
    try:
        with pytest.raises(ConnectionFailed, match="certificate verification failed"):
            run(srv.openai_url)
    finally:
        srv.stop()
        proxy.stop()


# ---------------------------------------------------------------- proxies
def test_https_goes_through_the_connect_proxy(authority, proxy, monkeypatch):
    monkeypatch.setenv("SSL_CERT_FILE", str(authority.ca))
    srv = FakeLLMServer(tls=server_context(authority), host=NAME).start()
    try:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        srv.enqueue(answer())
        assert run(srv.openai_url) == [TextDelta("secure"), Stop("end_turn")]
        assert [target for target, _ in proxy.tunnels] == [f"{NAME}:{srv.port}"]
        assert srv.requests[0].headers["host"] == f"{NAME}:{srv.port}"
    finally:
        srv.stop()


def test_http_proxy_with_credentials_tunnels_plain_http(monkeypatch):
    pair = base64.b64encode(b"me:s3cret pass").decode()
    proxy = ConnectProxy(hosts={NAME: "127.0.0.1"}, auth=f"Basic {pair}").start()
    srv = FakeLLMServer(host=NAME).start()
    try:
        monkeypatch.setenv("http_proxy", proxy.url.replace("://", "://me:s3cret%20pass@"))
        srv.enqueue(answer())
        assert run(srv.openai_url)[0] == TextDelta("secure")
        assert proxy.tunnels[0][1]["proxy-authorization"] == f"Basic {pair}"
    finally:
        srv.stop()
        proxy.stop()


def test_a_proxy_refusal_is_a_clear_error_without_retries(monkeypatch):
    proxy = ConnectProxy(hosts={NAME: "127.0.0.1"}, auth="Basic nope").start()
    try:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        with pytest.raises(ConnectionFailed, match=r"cannot reach http://api\.fake\.test:9/v1/"
                           r"chat/completions \(via proxy 127\.0\.0\.1:\d+\): .*407"):
            run(f"http://{NAME}:9/v1", max_retries=3)
        assert len(proxy.tunnels) == 1
    finally:
        proxy.stop()


def test_loopback_and_no_proxy_hosts_bypass_the_proxy(server, proxy, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    server.enqueue(answer())
    assert run(server.openai_url)[0] == TextDelta("secure")
    assert proxy.tunnels == []


@pytest.mark.parametrize("no_proxy, host, bypass", [
    ("example.com", "api.example.com", True), (".example.com", "example.com", True),
    ("example.com", "notexample.com", False), ("*", "anything.org", True),
    ("10.0.0.0/8", "10.1.2.3", True), ("10.0.0.0/8", "11.1.2.3", False),
    ("api.example.com:8443", "api.example.com", False), ("", "api.example.com", False)])
def test_no_proxy_rules(no_proxy, host, bypass):
    env = {"https_proxy": "http://proxy.local:3128", "no_proxy": no_proxy}
    chosen = net.proxy_for(net.Target(f"https://{host}/v1"), env)
    assert (chosen is None) == bypass
    if not bypass:
        assert chosen[:2] == ("proxy.local", 3128)


# ---------------------------------------------------------------- retries and typed errors
def test_retries_are_bounded_and_end_with_a_typed_rate_limit(server):
    limited = Status(429, {"error": {"message": "slow down", "type": "rate_limit_error"}},
                     {"retry-after-ms": "1"})
    server.enqueue(limited, limited, limited)
    events = []
    with pytest.raises(RateLimited, match="openai: HTTP 429: slow down") as caught:
        with gevent.Timeout(10):
            for event in OpenAIProvider(api_key=KEY, base_url=server.openai_url,
                                        max_retries=2).stream(ask()):
                events.append(event)
    assert caught.value.status == 429
    assert events == [Retrying(1, 0.001, "HTTP 429 Too Many Requests"),
                      Retrying(2, 0.001, "HTTP 429 Too Many Requests")]
    assert len(server.requests) == 3


def test_x_should_retry_false_is_honoured(server):
    server.enqueue(Status(503, {"error": {"message": "down"}}, {"x-should-retry": "false"}))
    with pytest.raises(ProviderHTTPError, match="HTTP 503: down"):
        run(server.openai_url, max_retries=2)
    assert len(server.requests) == 1


def test_a_connection_reset_before_the_answer_is_retried(server):
    server.enqueue(Hangup(), answer())
    events = run(server.openai_url, max_retries=1)
    assert isinstance(events[0], Retrying) and events[1:] == [TextDelta("secure"), Stop("end_turn")]
    assert server.connections == 2


def test_a_connection_dropped_after_the_answer_started_is_not_retried(server):
    server.enqueue(openai_sse(oa_text("x"), drop_after=0), answer())
    with pytest.raises(ConnectionFailed, match="lost the connection to http://127.0.0.1"):
        run(server.openai_url, max_retries=2)
    assert len(server.requests) == 1


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_cancel_while_waiting_for_the_answer_closes_the_connection(server, kind):
    stall = Stall()
    server.enqueue(stall)
    made = (OpenAIProvider(api_key=KEY, base_url=server.openai_url) if kind == "openai" else
            AnthropicProvider(api_key=KEY, base_url=server.root_url))
    consumer = Consumer(made.stream(ask()))
    assert stall.reached.wait(timeout=5)
    consumer.greenlet.kill(timeout=5)
    assert consumer.greenlet.dead and consumer.events == []
    assert stall.disconnected.wait(timeout=5), "the server never saw the connection close"


def test_cancel_interrupts_the_retry_wait(server):
    server.enqueue(Status(429, {"error": {"message": "later"}}, {"Retry-After": "30"}))
    consumer = Consumer(OpenAIProvider(api_key=KEY, base_url=server.openai_url,
                                       max_retries=2).stream(ask()))
    assert consumer.first.wait(timeout=5)
    assert consumer.events == [Retrying(1, 30.0, "HTTP 429 Too Many Requests")]
    consumer.greenlet.kill(timeout=5)
    assert consumer.greenlet.dead and len(server.requests) == 1


@pytest.mark.parametrize("status, body, kind, text", [
    (403, {"error": {"message": "project lacks access"}}, AuthenticationFailed,
     "openai: access denied (HTTP 403: project lacks access; check OPENAI_API_KEY)"),
    (400, {"error": {"message": "This model's maximum context length is 8192 tokens",
                     "code": "context_length_exceeded"}}, ContextOverflow,
     "openai: context window exceeded: This model's maximum context length is 8192 tokens"),
    (400, {"error": {"type": "invalid_request_error",
                     "message": "prompt is too long: 210000 tokens > 200000 maximum"}},
     ContextOverflow, "openai: context window exceeded: prompt is too long"),
    (422, {"detail": "unprocessable"}, ProviderHTTPError, "openai: HTTP 422: HTTP 422"),
    (500, "<html>oops</html>", ProviderHTTPError, "openai: HTTP 500: <html>oops</html>"),
])
def test_error_statuses_map_to_typed_errors(server, monkeypatch, status, body, kind, text):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    server.enqueue(Status(status, body))
    with pytest.raises(kind) as caught, gevent.Timeout(10):
        list(OpenAIProvider(base_url=server.openai_url, max_retries=0).stream(ask()))
    assert str(caught.value).startswith(text) and caught.value.status == status


# ---------------------------------------------------------------- connections
def test_keep_alive_connection_is_reused_and_a_stale_one_replaced(server):
    made = OpenAIProvider(api_key=KEY, base_url=server.openai_url, max_retries=0, api="chat")
    server.enqueue(answer(), openai_sse(oa_text("two"), oa_finish("stop"), close_after=True),
                   openai_sse(oa_text("three"), oa_finish("stop")))
    with gevent.Timeout(10):
        replies = [list(made.stream(ask()))[0].text for _ in range(3)]
    assert replies == ["secure", "two", "three"]
    assert server.connections == 2  # 1 and 2 shared one; 3 found it closed and reconnected
    assert len(server.requests) == 3


def test_custom_headers_and_the_user_agent_are_sent(server):
    server.enqueue(answer())
    run(server.openai_url, headers={"X-Title": "term2acp tests"})
    headers = server.requests[0].headers
    assert headers["x-title"] == "term2acp tests"
    assert headers["user-agent"].startswith("term2acp/")
    assert headers["accept"] == "text/event-stream"


def test_read_timeout_ends_a_silent_stream(server):
    held = openai_sse(oa_text("first"), oa_finish("stop"), hold_after=1)
    server.enqueue(held)
    with pytest.raises(ConnectionFailed, match="lost the connection to .*: timed out"):
        run(server.openai_url, timeout=0.3)
    assert held.disconnected.wait(timeout=5)


# ---------------------------------------------------------------- SSE framing
def test_sse_decoder_handles_split_lines_crlf_comments_and_multiline_data():
    decoder = SSEDecoder()
    stream = b": keep-alive\r\nevent: a\r\ndata: one\r\ndata: two\r\n\r\ndata: {\"x\": 1}\r\n\r\n"
    out = []
    for index in range(len(stream)):  # byte by byte: every split point
        out += decoder.feed(stream[index:index + 1])
    assert out == [("a", "one\ntwo"), (None, '{"x": 1}')]
    assert SSEDecoder().feed(b"data: a\r\rdata:b\n\n") == [(None, "a"), (None, "b")]
    cut = SSEDecoder()  # a server that closes right after its last data line
    assert cut.feed(b"data: 1\n\ndata: 2") == [(None, "1")]
    assert cut.finish() == [(None, "2")] and cut.finish() == []


# ---------------------------------------------------------------- pacing (issue 10 item 3)
def test_a_stream_that_never_pauses_still_lets_other_greenlets_run():
    """A server that keeps the socket full means reads never block; the stream loop must
    still give the hub a turn, so this test greenlet wakes long before the burst is read."""
    count = 200_000
    native = NativeBurstServer(Burst(None, oa_text("x"), count)).start()
    try:
        consumer = Consumer(OpenAIProvider(api_key=KEY, base_url=native.openai_url,
                                           max_retries=0).stream(ask()))
        assert consumer.first.wait(timeout=10)
        seen = len(consumer.events)
        assert 0 < seen < count, f"the consumer ran {seen} events without yielding"
        consumer.greenlet.kill(timeout=5)
        assert consumer.greenlet.dead
    finally:
        native.stop()


def test_a_configured_provider_sends_its_headers_and_timeouts(server, tmp_path):
    from term2acp.providers.catalog import Catalog
    from term2acp.settings import Settings

    config = tmp_path / "config.toml"
    config.write_text(f'[providers.router]\ntype = "anthropic"\nbase_url = "{server.root_url}"\n'
                      'timeout = 30\nmax_retries = 0\n'
                      '[providers.router.headers]\nX-Title = "term2acp"\n')
    settings = Settings.load(env={"TERM2ACP_CONFIG": str(config), "TERM2ACP_HOME": str(tmp_path),
                                  "TERM2ACP_LOCAL_MODEL": "off"})
    made = Catalog(settings).create("router")
    assert made._client.read_timeout == 30.0 and made._client.max_retries == 0
    server.enqueue(Status(500, {"error": {"message": "boom"}}))
    with pytest.raises(ProviderHTTPError, match="router: HTTP 500: boom"), gevent.Timeout(10):
        list(made.stream(ask()))
    sent = server.requests[0]
    assert sent.headers["x-title"] == "term2acp" and sent.headers["anthropic-version"]
    assert len(server.requests) == 1


def test_localhost_and_literal_addresses_connect_without_a_lookup(server):
    server.enqueue(answer(), answer())
    assert run(f"http://localhost:{server.port}/v1")[0] == TextDelta("secure")
    assert run(f"http://[::ffff:127.0.0.1]:{server.port}/v1")[0] == TextDelta("secure")
