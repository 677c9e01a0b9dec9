"""Gemini's explicit context cache (providers/gemini_cache.py) against the fake server:
made once the history has settled turns, named while it is the start of the request,
renewed before it expires, made again when the history is rewritten, deleted at close."""

import gevent
import pytest

from term2acp.providers import gemini_wire as wire
from term2acp.providers.base import ModelRequest
from term2acp.providers.gemini_cache import RENEW_BEFORE, TTL, ContextCaches
from term2acp.providers.http import HTTPClient
from tests.support import fake_google as g
from tests.support.fake_llm import FakeLLMServer, Status


@pytest.fixture
def server():
    srv = FakeLLMServer().start()
    yield srv
    srv.stop()


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def turns(count):
    history = []
    for number in range(count):
        history.append({"role": "user", "content": f"question {number}"})
        history.append({"role": "assistant", "content": f"answer {number}"})
    return history + [{"role": "user", "content": "the newest"}]


def ask(history):
    return ModelRequest(model="gemini-2.5-flash", system="You are a coder.", messages=history,
                        tools=[{"name": "read_file", "description": "Read",
                                "parameters": {"type": "object", "properties": {}}}],
                        cache_key="sess-1")


def test_made_named_renewed_remade_and_deleted(server):
    clock = Clock()
    caches = ContextCaches(HTTPClient(server.root_url + "/v1beta", {}, "gemini", "k", None),
                           "gemini", clock=clock)
    server.enqueue(g.cache_entry("cachedContents/one"))
    with gevent.Timeout(10):
        body = caches.apply(ask(turns(1)), wire.request_body(ask(turns(1))))
    made = server.wait_requests(1)[0]
    assert made.method == "POST" and made.path == "/v1beta/cachedContents"
    assert made.json["contents"] == wire.request_body(ask(turns(1)))["contents"][:2]
    assert body["cachedContent"] == "cachedContents/one" and "tools" not in body
    assert body["contents"] == [{"role": "user", "parts": [{"text": "the newest"}]}]

    clock.now += TTL - RENEW_BEFORE + 1  # close to its end: renewed before it is named
    server.enqueue(Status(200, {"name": "cachedContents/one"}))
    with gevent.Timeout(10):
        body = caches.apply(ask(turns(1)), wire.request_body(ask(turns(1))))
    renewed = server.wait_requests(2)[1]
    assert renewed.method == "PATCH" and renewed.path == \
        "/v1beta/cachedContents/one?updateMask=ttl" and renewed.json == {"ttl": f"{TTL}s"}
    assert body["cachedContent"] == "cachedContents/one"

    rewritten = [{"role": "user", "content": "a summary"},
                 {"role": "assistant", "content": "noted"}] + turns(1)  # a compaction
    server.enqueue(Status(200, {}), g.cache_entry("cachedContents/two"))
    with gevent.Timeout(10):
        body = caches.apply(ask(rewritten), wire.request_body(ask(rewritten)))
    deleted, again = server.wait_requests(4)[2:]
    assert deleted.method == "DELETE" and deleted.path == "/v1beta/cachedContents/one"
    assert again.method == "POST" and body["cachedContent"] == "cachedContents/two"

    server.enqueue(Status(200, {}))
    with gevent.Timeout(10):
        caches.close()
    assert server.wait_requests(5)[4].path == "/v1beta/cachedContents/two"


def test_a_cache_too_small_is_tried_again_once_the_history_doubled(server):
    caches = ContextCaches(HTTPClient(server.root_url + "/v1beta", {}, "gemini", "k", None),
                           "gemini", clock=Clock())
    server.enqueue(Status(400, {"error": {"code": 400, "status": "INVALID_ARGUMENT",
                                          "message": "Cached content is too small. "
                                          "total_token_count=90, min_total_token_count=1024"}}))
    with gevent.Timeout(10):
        body = caches.apply(ask(turns(1)), wire.request_body(ask(turns(1))))
        assert "cachedContent" not in body and "tools" in body  # sent whole
        caches.apply(ask(turns(1)), wire.request_body(ask(turns(1))))  # not asked again
    assert len(server.requests) == 1
    server.enqueue(g.cache_entry("cachedContents/big"))
    with gevent.Timeout(10):
        body = caches.apply(ask(turns(2)), wire.request_body(ask(turns(2))))
    assert body["cachedContent"] == "cachedContents/big" and len(server.requests) == 2
