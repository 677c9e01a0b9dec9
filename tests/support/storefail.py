"""Make a session store refuse writes, as a full disk would, from another connection."""

import sqlite3


def refusing_inserts(path, table):
    """A connection whose trigger makes every INSERT into ``table`` fail ("database or
    disk is full"); drop the trigger (``DROP TRIGGER no_room``) or close it to undo."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute(f"CREATE TRIGGER no_room BEFORE INSERT ON {table} BEGIN"
               " SELECT RAISE(ABORT, 'database or disk is full (simulated)'); END")
    return db
