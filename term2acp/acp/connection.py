"""The ACP connection: negotiation, lifecycle (initialize first, once, unbatched), routes.

One runtime, two protocol faces. ``initialize`` names the version: 1 gets the v1 face
(``acp/v1/``), 2 and above the v2 face (``acp/v2/handlers.py``, ``acp/v2/translate.py``; the
answer says 2, our latest). 0, a negative number or a non-integer is -32602. The request
is validated against the shape of the version it names, so a v1 client is never refused
for lacking v2 fields, and the version is fixed for the connection once answered.

The face (its session handlers, built with the session manager and the client's
:class:`~term2acp.acp.capabilities.ClientCapabilities`, and its route table of their
bound methods) is built by ``initialize``. The route tables declare everything about a
route (reader marks, wrappers); a face's routes wait in their own greenlet until the
session store is open. What only prompts need (``term2acp/preload.py``) the session
layer waits for before a turn starts.
"""

import functools
import logging

from term2acp import __version__
from term2acp.acp import methods as m
from term2acp.acp.capabilities import ClientCapabilities
from term2acp.acp.handlers import STEERING_META
from term2acp.acp.schemas.base import load
from term2acp.acp.schemas.initialize import InitializeRequestSchema, InitializeV1RequestSchema
from term2acp.acp.signin import auth_methods
from term2acp.acp.v2.handlers import V2Handlers
from term2acp.acp.v2.routes import routes
from term2acp.rpc.messages import Route
from term2acp.rpc.errors import InvalidParamsError, InvalidRequestError

log = logging.getLogger(__name__)

AGENT_INFO = {"name": "term2", "title": "term2", "version": __version__}


class Connection:
    """Built whole by the composition root (``server.py``) with the session manager, the
    client proxy, the settings, the catalog (``authMethods`` name its providers' key
    variables) and ``sessions_ready`` (waits, cooperatively, until the session store is
    open: every route of the face waits for it in its own greenlet, never in the reader)."""

    def __init__(self, manager, client, settings, catalog, sessions_ready=None):
        self.manager = manager
        self.client = client
        self.settings = settings
        self.catalog = catalog
        self._route = functools.partial(_route, ready=sessions_ready)
        self.initialized = False
        self.version = None  # fixed by initialize: 1 or 2
        self.face = None  # the negotiated face's session handlers, built by initialize
        self._schemas = {1: InitializeV1RequestSchema(), 2: InitializeRequestSchema()}
        self.routes = {m.INITIALIZE: Route(self.initialize, self._load_initialize, inline=True)}

    def _build_face(self, capabilities):
        """The negotiated face: its handlers (with the session manager and what the client
        advertised) and the route table of their bound methods. The v1 face is imported by
        a v1 ``initialize``: a v2 connection never loads it."""
        if self.version == m.PROTOCOL_V1:
            from term2acp.acp.v1.handlers import V1Handlers
            from term2acp.acp.v1.routes import routes as v1_routes

            face = V1Handlers(self.manager, self.client, self.settings, capabilities)
            table = v1_routes(face, self._route)
        else:
            face = V2Handlers(self.manager, self.client, self.settings, capabilities)
            table = routes(face, self._route)
        self.face = face
        self.routes.update(table)

    # ------------------------------------------------------------ router protocol
    def admit(self, method, batch_size):
        if method in m.UNBATCHABLE and batch_size > 1:
            raise InvalidRequestError(f"{method} must not be sent inside a batch")
        if method == m.INITIALIZE:
            if self.initialized:
                raise InvalidRequestError("connection is already initialized")
        elif not self.initialized:
            raise InvalidRequestError(f"connection must be initialized before {method}")

    def lookup(self, method):
        """The route of ``method`` (runs in the reader: never waits), or None: -32601."""
        return self.routes.get(method)

    # ------------------------------------------------------------ initialize
    def _load_initialize(self, params):
        """Validate against the version the request names (v2's shape unless it names 1)."""
        version = params.get("protocolVersion")
        named = isinstance(version, int) and not isinstance(version, bool)
        if named and version < 1:
            raise InvalidParamsError(
                f"protocolVersion {version} is not a protocol version: send 1 (ACP v1) or "
                "2 (ACP v2)", data={"supported": [m.PROTOCOL_V1, m.PROTOCOL_VERSION]})
        return load(self._schemas[1 if named and version == 1 else 2], params)

    def initialize(self, params):
        version = m.PROTOCOL_V1 if params["protocol_version"] == 1 else m.PROTOCOL_VERSION
        self.version = version
        advertised = params["client_capabilities" if version == m.PROTOCOL_V1 else "capabilities"]
        capabilities = ClientCapabilities(advertised, version)
        self._build_face(capabilities)
        self.initialized = True  # once the face exists (else the client may initialize again)
        methods = auth_methods(self.catalog, capabilities.terminal_auth, version)
        if version == m.PROTOCOL_V1:
            return self._v1_answer(methods)
        prompt = {"embeddedContext": {}}
        if self.catalog.accepts_images():  # else turns/content.py refuses them (-32602)
            prompt["image"] = {}
        return {"protocolVersion": m.PROTOCOL_VERSION, "info": dict(AGENT_INFO),
                "capabilities": {"session": {"prompt": prompt,
                                             "mcp": {"stdio": {}, "http": {}},
                                             "fork": {}, "delete": {},
                                             "additionalDirectories": {}}},
                "authMethods": methods, "_meta": dict(STEERING_META)}

    def _v1_answer(self, methods):
        prompt = {"embeddedContext": True}
        if self.catalog.accepts_images():
            prompt["image"] = True
        return {
            "protocolVersion": m.PROTOCOL_V1,
            "agentInfo": dict(AGENT_INFO),
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": prompt,
                "mcpCapabilities": {"http": True, "sse": True},  # stdio is v1's baseline
                "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "fork": {},
                                        "delete": {}, "additionalDirectories": {}},
                "auth": {"logout": {}},
            },
            "authMethods": methods,
            "_meta": dict(STEERING_META),
        }


def _route(handler, schema, inline=False, quick=False, mark=None, wrap=None, ready=None):
    """One route of a face's table (``acp/v2/routes.py``, ``acp/v1/routes.py``), as the
    table declares it: ``mark`` runs in the reader as the line is read (``Route.mark``),
    ``wrap(handler)`` is the handler that runs (e.g. session/new's
    ``BaseHandlers.creating``); ``ready`` (the connection's) is waited for first, except by
    an ``inline`` route (it runs in the reader, which never waits)."""
    if wrap is not None:
        handler = wrap(handler)
    if ready is not None and not inline:
        handler = _after(ready, handler)
    return Route(handler, functools.partial(load, schema), inline, mark=mark, quick=quick)


def _after(ready, handler):
    def handle(params):
        ready()
        return handler(params)

    return handle
