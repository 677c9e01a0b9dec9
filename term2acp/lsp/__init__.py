"""Code intelligence from language servers: the new errors a write brings
(``diagnostics.py``, hooked into every tool call's writes by ``turns/calls.py``) and the
``code`` tool's questions (``queries.py``, ``tools/code.py``).

``servers.py`` says which server serves a file (the built-ins found on the agent's PATH,
the configured ones) and what of its installation the sandbox must show; ``connection.py``
is one running server (sandboxed, its pipes through ``sandbox/process.py``, the protocol
through pygls's JSON-RPC, imported with the first server; ``wire.py`` joins the two);
``registry.py`` keeps a session's servers (one per root and server, started lazily,
restarted once after a crash, stopped with the session).
"""
