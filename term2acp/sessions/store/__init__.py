"""The embedded session store: SQLite (stdlib), WAL, busy timeout, forward migrations.

Three parts:

* ``schema.py``: the file: connect, PRAGMAs, migrations, a damaged file moved aside;
* ``worker.py``: the store thread: one native thread with its own connection runs the
  jobs in the order they were sent and delivers their results and errors to the
  greenlets waiting for them (they wait cooperatively on the hub);
* ``api.py``: :class:`Store`, on the hub: queued writes, the one commit path, reads and
  queries.

Writes are not sent one by one: they queue in memory on the hub (a list append), with the
journal records the Recorders (``sessions/journal.py``) consolidate, and go to the thread
as one batch, one transaction, with the next read or commit. Nothing holds the write lock
between batches, so several processes may share the file. Jobs run in order, so a read
sees every write made before it; the price is that a read waits behind a batch that waits
for another process's write lock (session/list reads on a connection of the hub's own).

Durability: :meth:`Store.commit` is the one commit path; it waits cooperatively until
everything written so far, and every record a Recorder holds, is committed. The protocol
writer calls :meth:`Store.commit_quietly` (the same commit, logging instead of raising)
right before it writes a batch of lines: each line it writes reports only what is
committed, so a ``kill -9`` loses nothing the client was told. The writer waits for that
commit cooperatively: the hub runs meanwhile (the turn streams on; lines queued during the
wait go out with the next batch, a streamed answer's records in a few transactions), and
no second path or native wait decides when something is durable. The turn commits,
waiting, before each request to the model, so a failure of that batch fails the turn
before anything of the answer is shown. A batch that fails (disk full, locked past the
busy timeout, a damaged file) is rolled back; whoever waited for it gets the
:class:`StoreError`, and every session whose changes it carried is told on its own next
``commit(session_id)``.
"""

from term2acp.sessions.store.api import Store, now, store_for, store_path
from term2acp.sessions.store.listing import decode_cursor, encode_cursor
from term2acp.sessions.store.schema import BUSY_WAIT, MIGRATIONS, SCHEMA_VERSION

__all__ = ["BUSY_WAIT", "MIGRATIONS", "SCHEMA_VERSION", "Store", "decode_cursor",
           "encode_cursor", "now", "store_for", "store_path"]
