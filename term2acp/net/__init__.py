"""The agent's one network path: every HTTP request the agent makes goes through here.

The providers (``providers/http.py``: retries and the providers' typed errors on top),
``web_fetch`` (``tools/webpage.py``) and the MCP transports and sign-in (``mcp/http.py``,
``mcp/oauth.py``) all reach servers the same way, so a proxy, a CA bundle or a loopback
rule set for one holds for all:

* ``address.py``: where a request goes (:class:`~term2acp.net.address.Target`), the proxy
  for it (``HTTPS_PROXY``/``HTTP_PROXY``/``ALL_PROXY``/``NO_PROXY``; loopback is direct),
  the TLS context (system CAs or ``SSL_CERT_FILE``/``REQUESTS_CA_BUNDLE``/``SSL_CERT_DIR``),
  and the name lookup;
* ``connection.py``: the one connection factory (``http.client`` under gevent's patch, a
  ``CONNECT`` tunnel through the proxy, no lookup for literal addresses), what a failure
  was and whether a retry could help, and the retry delays (backoff, ``Retry-After``);
* ``sse.py``: the one server-sent-events decoder (model streams, MCP's event streams) and
  the pacing rule for a stream that never blocks;
* ``errors.py``: the failures of this layer (:class:`~term2acp.net.errors.NetError`).

``tests/unit/test_layering.py`` fails on an HTTP connection made or an event stream
decoded anywhere else. The package imports nothing of ours but ``core``; ``http.client``
and ``ssl`` come in with ``connection.py``, which only what makes requests imports.
"""
