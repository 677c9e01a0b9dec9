"""Store migration 2 (issue 15): a session's picker choices are columns of its row."""

import sqlite3

from term2acp.sessions import store as st


def test_a_version_1_store_migrates_and_keeps_its_sessions(tmp_path):
    path = str(tmp_path / "sessions.sqlite3")
    db = sqlite3.connect(path, isolation_level=None)
    for statement in st.MIGRATIONS[1].split(";"):
        if statement.strip():
            db.execute(statement)
    db.execute("INSERT INTO sessions VALUES ('s1', '/w', 't', 'a', 'b', 'openai', 'gpt-4o')")
    db.execute("PRAGMA user_version = 1")
    db.close()
    store = st.Store(path).open()
    row = store.get_session("s1")
    assert (row["provider"], row["model"], row["effort"], row["mode"]) == \
        ("openai", "gpt-4o", None, None)  # None: the config file's defaults
    store.set_choices("s1", "openai", "gpt-5", "high", "read-only")
    store.commit()
    store.close()
    again = st.Store(path).open()
    row = again.get_session("s1")
    assert (row["model"], row["effort"], row["mode"]) == ("gpt-5", "high", "read-only")
    assert again._db.execute("PRAGMA user_version").fetchone()[0] == st.SCHEMA_VERSION == 2
    again.close()
