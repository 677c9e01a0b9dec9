"""The MCP servers a session was last connected with, as ``ServerConfig.describe()`` (no
secrets), kept for session/list (migration 3: test_option_values_store.py); ``[mcp]
call_timeout`` reaches the hub."""

import sqlite3

import pytest

from term2acp.mcp.config import parse_servers
from term2acp.providers.catalog import Catalog
from term2acp.sessions import store as st
from term2acp.sessions.manager import SessionManager
from term2acp.settings import Settings, SettingsError

SECRET = "sk-very-secret-value"


def _entries(tmp_path):
    return [{"name": "local", "command": str(tmp_path / "no-such-server"), "args": ["--token", "x"],
             "env": [{"name": "API_KEY", "value": SECRET}]},
            {"type": "http", "name": "web", "url": f"https://user:{SECRET}@example.com:8443/mcp?key={SECRET}#f",
             "headers": [{"name": "Authorization", "value": f"Bearer {SECRET}"}]}]


def _manager(tmp_path, config=""):
    path = tmp_path / "config.toml"
    path.write_text(config)
    settings = Settings.load(env={"TERM2ACP_HOME": str(tmp_path / "home"),
                                  "TERM2ACP_CONFIG": str(path)})
    return SessionManager(settings, Catalog(settings), dict)


def test_an_unreadable_column_lists_no_servers(tmp_path):
    store = st.Store(str(tmp_path / "sessions.sqlite3")).open()
    store.create_session("s1", "/w", None, None)
    for junk in ("not json", '{"a": 1}', '[1, "x"]'):
        with sqlite3.connect(store.path) as db:  # a column another program wrote
            db.execute("UPDATE sessions SET mcp_servers = ?", (junk,))
        db.close()
        assert store.get_session("s1")["mcp_servers"] == []
    store.close()


def test_connect_mcp_stores_names_and_transports_never_secrets(tmp_path):
    manager = _manager(tmp_path, "[mcp]\ncall_timeout = 7.5\n")
    session = manager.new(str(tmp_path))
    manager.connect_mcp(session, parse_servers(_entries(tmp_path)))
    assert session.mcp.call_timeout == 7.5  # the setting reaches the hub and its tools
    manager.flush()
    expected = [{"name": "local", "transport": "stdio", "command": str(tmp_path / "no-such-server")},
                {"name": "web", "transport": "http", "url": "https://example.com:8443/mcp"}]
    rows, _ = manager.list()
    assert rows[0]["mcp_servers"] == expected
    manager.shutdown(1)
    data = b"".join(p.read_bytes() for p in (tmp_path / "home").iterdir() if p.is_file())
    assert SECRET.encode() not in data and b"--token" not in data


def test_a_resume_replaces_the_stored_servers_and_an_unchanged_list_is_not_rewritten(tmp_path):
    manager = _manager(tmp_path)
    session = manager.new(str(tmp_path))
    writes = []
    real = manager.store.set_mcp_servers
    manager.store.set_mcp_servers = lambda sid, described: writes.append(described) or real(sid, described)
    manager.connect_mcp(session, [])  # nothing before, nothing now: no write
    configs = parse_servers(_entries(tmp_path)[:1])
    manager.connect_mcp(session, configs)
    manager.connect_mcp(session, configs)  # the same list again (a resume of a live session)
    assert len(writes) == 1
    manager.close(session.id)
    again, _ = manager.resume(session.id, str(tmp_path))
    assert again.mcp_stored == writes[0]  # read back from the row
    manager.connect_mcp(again, [])  # resumed without servers: the session has none now
    manager.flush()
    assert manager.list()[0][0]["mcp_servers"] == [] and writes[-1] == []
    manager.shutdown(1)


def test_call_timeout_setting(tmp_path):
    assert Settings().mcp.call_timeout == 120.0
    path = tmp_path / "config.toml"
    env = {"TERM2ACP_HOME": str(tmp_path), "TERM2ACP_CONFIG": str(path)}
    for text, expected in (("call_timeout = 0.25", 0.25), ("call_timeout = 30", 30.0)):
        path.write_text(f"[mcp]\n{text}\n")
        assert Settings.load(env=env).mcp.call_timeout == expected, text
    for text in ("call_timeout = 0", "call_timeout = true", 'call_timeout = "5"'):
        path.write_text(f"[mcp]\n{text}\n")
        with pytest.raises(SettingsError, match="mcp.call_timeout: must be"):
            Settings.load(env=env)
