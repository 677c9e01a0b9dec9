"""Model-facing names and cleaned schemas; server entries and what may be shown of them."""

import pytest

from term2acp.mcp.config import ServerConfig, from_acp
from term2acp.mcp.naming import MAX_NAME, clean_schema, server_names, tool_name


def test_names_are_reduced_unique_short_and_stable():
    shorts = server_names(["my server!", "my_server", "git", "git"])
    assert shorts[0] == "my_server" and shorts[2] == "git"
    assert len(set(shorts)) == 4
    assert server_names(["my server!", "my_server", "git", "git"]) == shorts  # stable

    taken = set()
    assert tool_name("git", "log", taken) == "mcp__git__log"
    assert tool_name("git", "read.file", taken) == "mcp__git__read_file"
    clash = tool_name("git", "read/file", taken)  # reduces to the same name
    assert clash != "mcp__git__read_file" and clash.startswith("mcp__git__read_file")
    long = tool_name("git", "x" * 100, taken)
    assert len(long) <= MAX_NAME and long == tool_name("git", "x" * 100, set())
    assert all(len(n) <= MAX_NAME for n in taken)
    assert tool_name("s", "ünïcode tool", set()) == "mcp__s__n_code_tool"


def test_schema_cleaning_keeps_property_names_and_values():
    raw = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
           "anyOf": [{"required": ["a"]}],
           "properties": {"examples": {"type": "string", "examples": ["x"]},
                          "deprecated": {"type": "boolean", "default": {"$id": "kept"}},
                          "nested": {"type": "object", "$comment": "drop",
                                     "properties": {"$id": {"type": "string"}}}},
           "required": ["examples"]}
    assert clean_schema(raw) == {
        "type": "object",
        "properties": {"examples": {"type": "string"},
                       "deprecated": {"type": "boolean", "default": {"$id": "kept"}},
                       "nested": {"type": "object", "properties": {"$id": {"type": "string"}}}},
        "required": ["examples"]}
    assert clean_schema(None) == {"type": "object", "properties": {}}
    assert clean_schema({"type": "string"}) == {"type": "object", "properties": {}}
    assert clean_schema({"properties": {}, "required": "a"}) == {"type": "object", "properties": {}}


def test_acp_entries_become_configs_and_secrets_stay_hidden():
    stdio = from_acp({"name": "fs", "command": "/bin/srv", "args": ["-v"],
                      "env": [{"name": "TOKEN", "value": "s3cret"}]})
    assert stdio == ServerConfig("fs", "stdio", command="/bin/srv", args=("-v",))
    assert stdio.env == {"TOKEN": "s3cret"} and "s3cret" not in repr(stdio)
    http = from_acp({"type": "http", "name": "web", "url": "https://u:pw@example.com:8443/mcp?key=k#f",
                     "headers": [{"name": "Authorization", "value": "Bearer abc"}]})
    assert http.safe_url == "https://example.com:8443/mcp"
    assert "abc" not in repr(http) and "pw" not in repr(http) and "key=k" not in repr(http)
    assert http.describe() == {"name": "web", "transport": "http", "url": "https://example.com:8443/mcp"}
    assert from_acp({"type": "sse", "name": "old", "url": "http://h/sse"}).transport == "sse"


@pytest.mark.parametrize("entry, message", [
    ({"command": "/bin/x"}, "non-empty name"),
    ({"name": "a"}, "command is required"),
    ({"name": "a", "command": "/x", "args": [1]}, "args must be strings"),
    ({"name": "a", "command": "/x", "env": [{"name": "A"}]}, "env entries"),
    ({"name": "a", "command": "/x", "env": {"A": "1"}}, "env must be an array"),
    ({"type": "http", "name": "a", "url": "http://h", "headers": [{"name": "", "value": "v"}]},
     "headers entries"),
    ({"type": "http", "name": "a", "url": "ftp://h"}, "url must be http"),
    ({"type": "ws", "name": "a", "url": "ws://h"}, "unknown type"),
])
def test_malformed_entries_are_refused(entry, message):
    with pytest.raises(ValueError, match=message):
        from_acp(entry)


def test_parse_servers_names_the_entry_and_applies_the_version_rules():
    from term2acp.mcp.config import parse_servers

    assert parse_servers(None) == [] and parse_servers([]) == []
    bare = [{"name": "a", "command": "/bin/a"}, {"name": "npx-one", "command": "npx", "args": ["x"]}]
    with pytest.raises(ValueError, match=r"mcpServers\[1\] \('npx-one'\): command must be an absolute"):
        parse_servers(bare)
    assert [c.command for c in parse_servers(bare, absolute_command=False)] == ["/bin/a", "npx"]
    with pytest.raises(ValueError, match=r"mcpServers\[0\] \('old'\): the sse transport is not"):
        parse_servers([{"type": "sse", "name": "old", "url": "http://h/sse"}], transports=("stdio", "http"))
    with pytest.raises(ValueError, match=r"mcpServers\[0\]: an MCP server needs a non-empty name"):
        parse_servers([{"command": "/x"}])
    with pytest.raises(ValueError, match="must be an array"):
        parse_servers({"name": "a"})
