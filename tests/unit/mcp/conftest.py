import pytest

from term2acp.mcp.config import from_acp
from term2acp.mcp.hub import McpHub
from tests.support.mcp_servers import HttpServer


@pytest.fixture
def root(tmp_path):
    path = tmp_path / "work"
    path.mkdir()
    return str(path.resolve())


@pytest.fixture
def make_hub(root):
    """``make_hub(*acp_entries, **options)``: a started hub, closed after the test."""
    hubs = []

    def _make(*entries, **options):
        hub = McpHub([from_acp(e) for e in entries], root, **options)
        hubs.append(hub)
        return hub.start()

    yield _make
    for hub in hubs:
        hub.close()


@pytest.fixture(scope="module")
def http_server():
    server = HttpServer("http")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def sse_server():
    server = HttpServer("sse")
    yield server
    server.stop()


# The official-SDK server (tests/support/mcp_server.py): a few tests keep talking to it so
# that the fake the others use (tests/support/mcp_fake.py) stays true to the real thing.
@pytest.fixture(scope="module")
def official_http_server():
    server = HttpServer("http", official=True)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def official_sse_server():
    server = HttpServer("sse", official=True)
    yield server
    server.stop()
