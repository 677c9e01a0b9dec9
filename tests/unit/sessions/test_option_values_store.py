"""Store migrations: 2 (issue 15), a session's config option values are columns of its row;
3 (issue 13), the MCP servers it was last connected with (no secrets)."""

import sqlite3

from term2acp.sessions import store as st


def store_at(path, version, row):
    """A store file as ``version`` of the schema left it, holding one session ``row``."""
    db = sqlite3.connect(path, isolation_level=None)
    for step in range(1, version + 1):
        for statement in st.MIGRATIONS[step].split(";"):
            if statement.strip():
                db.execute(statement)
    db.execute(f"INSERT INTO sessions VALUES ({', '.join('?' * len(row))})", row)
    db.execute(f"PRAGMA user_version = {version}")
    db.close()


def rows(path, sql):
    db = sqlite3.connect(path)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def test_a_version_1_store_migrates_and_keeps_its_sessions(tmp_path):
    path = str(tmp_path / "sessions.sqlite3")
    store_at(path, 1, ("s1", "/w", "t", "a", "b", "openai", "gpt-4o"))
    store = st.Store(path).open()
    row = store.get_session("s1")
    assert (row["provider"], row["model"], row["effort"], row["mode"]) == \
        ("openai", "gpt-4o", None, None)  # None: the config file's defaults
    store.set_option_values("s1", "openai", "gpt-5", "high", "read-only")
    store.commit()
    store.close()
    again = st.Store(path).open()
    row = again.get_session("s1")
    assert (row["model"], row["effort"], row["mode"]) == ("gpt-5", "high", "read-only")
    assert rows(path, "PRAGMA user_version")[0][0] == st.SCHEMA_VERSION >= 2
    again.close()


def test_a_version_2_store_migrates_and_keeps_its_sessions(tmp_path):
    path = str(tmp_path / "sessions.sqlite3")
    store_at(path, 2, ("s1", "/w", "t", "a", "b", "openai", "gpt-4o", "high", "ask"))
    store = st.Store(path).open()
    row = store.get_session("s1")
    assert (row["effort"], row["mode"], row["mcp_servers"]) == ("high", "ask", [])
    assert store.list_sessions()[0][0]["mcp_servers"] == []
    store.set_mcp_servers("s1", [{"name": "gh", "transport": "http", "url": "https://h/mcp"}])
    store.commit()
    store.close()
    again = st.Store(path).open()
    assert again.get_session("s1")["mcp_servers"] == [{"name": "gh", "transport": "http",
                                                       "url": "https://h/mcp"}]
    assert rows(path, "PRAGMA user_version")[0][0] == st.SCHEMA_VERSION >= 3
    again.set_mcp_servers("s1", [])
    again.commit()
    assert again.get_session("s1")["mcp_servers"] == []
    assert rows(path, "SELECT mcp_servers FROM sessions")[0][0] is None
    again.close()
