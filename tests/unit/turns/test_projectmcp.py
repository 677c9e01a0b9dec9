"""A workspace's .mcp.json in Claude Code's shape becomes the same server configs an editor
sends (turns/projectmcp.py)."""

import json

import pytest

from term2acp.mcp import config as mcp_config
from term2acp.turns.projectmcp import entries


def configs(document):
    return mcp_config.parse_servers(entries(json.dumps(document).encode()),
                                    absolute_command=False)


def test_projectmcp_stdio_and_http_servers():
    stdio, http = configs({"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "server"], "env": {"TOKEN_FILE": "/t"}},
        "web": {"type": "http", "url": "https://mcp.example.com/mcp",
                "headers": {"X-Team": "blue"}}}})
    assert (stdio.name, stdio.transport, stdio.command, stdio.args) == \
        ("files", "stdio", "npx", ("-y", "server"))
    assert stdio.env == {"TOKEN_FILE": "/t"}
    assert (http.name, http.transport, http.url, http.headers) == \
        ("web", "http", "https://mcp.example.com/mcp", {"X-Team": "blue"})
    assert configs({}) == [] and configs({"mcpServers": {}}) == []


@pytest.mark.parametrize("document, message", [
    ({"mcpServers": []}, "must be an object of servers by name"),
    ({"mcpServers": {"a": "npx"}}, "server 'a' must be an object"),
    ({"mcpServers": {"a": {"command": "x", "env": {"N": 1}}}}, "env must be an object of strings"),
    ({"mcpServers": {"a": {"type": "http", "url": "ftp://x"}}}, "url must be http(s)"),
])
def test_projectmcp_mistakes_name_the_server(document, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        configs(document)
