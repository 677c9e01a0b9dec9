"""MCP servers the editor configures for a session: a small client that speaks MCP's
JSON-RPC itself under gevent, and the tools it gives the model.

Why not the official ``mcp`` client: it is asyncio-based and brings pydantic, anyio and
httpx; importing it costs about a second and tens of MB (bench/mcp), and hosting an asyncio loop beside gevent needs a dedicated thread.
The client side of MCP that we need (initialize, tools, resources, prompts, elicitation,
a few notifications) is small JSON-RPC, so we speak it here, cooperatively.

Modules: ``config`` (what a server entry is, secrets kept out of reprs), ``rpc`` (requests,
responses, notifications over any transport; the server's own requests each in a greenlet),
``dial`` (one HTTP connection from ``term2acp/net/``: the providers' proxy and CAs), ``stdio`` and ``http``
(transports), ``client`` (handshake with version fallback, tools, prompts), ``naming``
(model-facing names and schemas), ``adapter`` (an MCP tool as one of our tools; a server's
elicitation through the running call), ``resources`` (the two resource tools), ``prompts``
(the slash commands servers bring: prompts, sign-in), ``offer`` (which tools a model request
offers, and the ``mcp_tools`` tool), ``hub`` (a session's servers), ``keeper`` (nothing a
stdio server started outlives a killed agent); sign-in: ``oauth`` (discovery, registration,
tokens; authlib), ``signin`` (the URL and the loopback redirect), ``tokens`` (the token
files), ``accounts`` (a hub's sign-ins).
"""
