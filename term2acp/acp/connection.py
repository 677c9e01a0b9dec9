"""The ACP connection: negotiation, lifecycle (initialize first, once, unbatched), routes.

One runtime, two protocol faces. ``initialize`` names the version: 1 gets the v1 face
(``acp/v1/``), 2 and above the v2 face (``acp/v2/handlers.py``, ``acp/v2/translate.py``; the
answer says 2, our latest). 0, a negative number or a non-integer is -32602. The request
is validated against the shape of the version it names, so a v1 client is never refused
for lacking v2 fields, and the version is fixed for the connection once answered.

The face (its session handlers, with the session manager, and its route table of their
bound methods) is built once, by the first session method, when the session store is
open (:meth:`Connection.lookup`). Prompts also wait for what only they need
(``term2acp/preload.py``).
"""

import functools
import logging

from gevent.lock import Semaphore

from term2acp import __version__
from term2acp.acp import methods as m
from term2acp.acp.elicitation import ElicitationSupport
from term2acp.acp.handlers import STEERING_META
from term2acp.acp.schemas.base import load
from term2acp.acp.schemas.initialize import InitializeRequestSchema, InitializeV1RequestSchema
from term2acp.acp.signin import auth_methods
from term2acp.acp.v1.handlers import V1Handlers
from term2acp.acp.v1.routes import routes as v1_routes
from term2acp.acp.v2.handlers import V2Handlers
from term2acp.acp.v2.routes import routes
from term2acp.providers.catalog import Catalog
from term2acp.rpc.messages import Route
from term2acp.rpc.errors import InternalError, InvalidParamsError, InvalidRequestError

log = logging.getLogger(__name__)

AGENT_INFO = {"name": "term2", "title": "term2", "version": __version__}


class ClientFiles:
    """What a v1 client advertised under ``clientCapabilities.fs``."""

    __slots__ = ("read", "write")

    def __init__(self, capabilities):
        fs = (capabilities or {}).get("fs")
        fs = fs if isinstance(fs, dict) else {}
        self.read = fs.get("readTextFile") is True
        self.write = fs.get("writeTextFile") is True


def advertises_compaction(capabilities):
    """``session.compaction`` is an object in the client's capabilities (v1's
    ``ClientSessionCapabilities.compaction``; v2 has no field yet, so the same shape under
    ``capabilities.session`` is honoured there)."""
    session = (capabilities or {}).get("session") if isinstance(capabilities, dict) else None
    return isinstance(session, dict) and isinstance(session.get("compaction"), dict)


def terminal_output_meta(capabilities):
    """v1 ``_meta.terminal_output: true``: the client (Zed) shows a tool call's command in
    its own terminal fed through ``_meta`` (``acp/v1/terminal_meta.py``)."""
    meta = (capabilities or {}).get("_meta") if isinstance(capabilities, dict) else None
    return isinstance(meta, dict) and meta.get("terminal_output") is True


def terminal_auth(capabilities, version):
    """How the client can run ``term2-acp --login`` itself: ``"auth"`` (v1
    ``auth.terminal: true``, v2 ``auth.terminal: {}``), ``"meta"`` (only
    ``_meta["terminal-auth"]: true``, which the ACP registry's validator and clients older
    than ``auth.terminal`` send: they read the command line from the method's ``_meta``),
    or None."""
    if not isinstance(capabilities, dict):
        return None
    auth = capabilities.get("auth")
    terminal = auth.get("terminal") if isinstance(auth, dict) else None
    if terminal is True if version == 1 else isinstance(terminal, dict):
        return "auth"
    meta = capabilities.get("_meta")
    if isinstance(meta, dict) and meta.get("terminal-auth") is True:
        return "meta"
    return None


# Handlers that use what the preload prepares (tools, sandbox, providers): they wait for it
NEEDS_TURNS = frozenset({m.SESSION_PROMPT})


class Connection:
    def __init__(self, manager_factory, client, settings):
        self._manager_factory = manager_factory
        self.face = None  # the negotiated face's session handlers, built by open_face
        self._building = Semaphore()  # one open_face at a time (building may yield)
        self.client = client
        self.settings = settings
        self.initialized = False
        self.version = None  # fixed by initialize: 1 or 2
        self.client_files = ClientFiles(None)
        self.terminal_auth = None  # how the client runs term2-acp --login: "auth", "meta"
        self._catalog = None  # the server's catalog (set by the composition root)
        self.client_compaction = False  # compaction_update allowed (else agent messages)
        self.client_terminal_meta = False  # v1 _meta.terminal_output (Zed's terminal)
        self.client_elicitation = ElicitationSupport(None)  # elicitation/create modes
        self.before_sessions = None  # waits (cooperatively) until the session store is open
        self.before_turns = None  # waits until what only prompts need is prepared
        # Images are advertised when the default model takes them (catalog or config
        # ``images``); turns/content.py refuses them with -32602 for a model that does not.
        self.accepts_images = lambda: (getattr(self, "catalog", None) is not None
                                       and self.catalog.accepts_images())
        self._schemas = {1: InitializeV1RequestSchema(), 2: InitializeRequestSchema()}
        self.routes = {m.INITIALIZE: Route(self.initialize, self._load_initialize, inline=True)}

    @property
    def catalog(self):
        if self._catalog is None:
            self._catalog = Catalog(self.settings)
        return self._catalog

    @catalog.setter
    def catalog(self, catalog):
        self._catalog = catalog

    def _auth_methods(self, version):
        return auth_methods(self.catalog, self.terminal_auth, version)

    # ------------------------------------------------------------ faces
    def open_face(self):
        """Build the negotiated face once: its handlers (with the session manager) and its
        route table of their bound methods. Waits cooperatively until the session store
        is open."""
        if self.face is None and self.before_sessions is not None:
            self.before_sessions()
        with self._building:
            if self.face is None:  # else built by another greenlet meanwhile
                self._build_face()
        return self.face

    def _build_face(self):
        manager = self._manager_factory()
        if self.version == m.PROTOCOL_V1:
            face = V1Handlers(manager, self.client, self.settings, self.client_files)
            face.terminal_meta = self.client_terminal_meta
            table = v1_routes(face, _route)
        else:
            face = V2Handlers(manager, self.client, self.settings)
            table = routes(face, _route)
        face.compaction = self.client_compaction
        face.questions = self.client_elicitation
        if self.before_turns is not None:
            face.wait_turns = self.before_turns
        new = table[m.SESSION_NEW]
        new.handler = functools.partial(self._new_session, manager, new.handler)
        for method in NEEDS_TURNS & table.keys():
            table[method].handler = functools.partial(self._after_turns, table[method].handler)
        table[m.SESSION_CLOSE].mark = self._mark_closing
        table[m.SESSION_PROMPT].mark = self._mark_prompt
        self.face = face
        self.routes.update(table)

    @property
    def manager(self):
        """The session manager, or None while the face is not built."""
        return self.face.manager if self.face is not None else None

    def _new_session(self, manager, new_session, params):
        # whatever fails after the row was created (either face), no row stays listed
        with manager.undo_new_on_failure():
            return new_session(params)

    def _after_turns(self, handler, params):
        if self.before_turns is not None:
            self.before_turns()
        return handler(params)

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
        """The route of ``method``. Runs in the reader, which must never wait: a method of
        the face read before the face is built gets a route that builds it first, in the
        request's own greenlet (:meth:`_before_face`); anything else unknown is -32601 at
        once."""
        route = self.routes.get(method)
        if route is None and self.initialized and self.face is None:
            faces = m.V1_FACE if self.version == m.PROTOCOL_V1 else m.V2_FACE
            if method in faces:
                route = Route(functools.partial(self._before_face, method))
        return route

    def _before_face(self, method, params):
        """Serve a face method read before the face existed: wait (cooperatively) until the
        face is built, then load, mark and handle as its route says."""
        try:
            self.open_face()
        except Exception as exc:  # noqa: BLE001 - told to this call; the next retries
            log.exception("building the session handlers failed")
            raise InternalError(f"Internal error: {type(exc).__name__}") from None
        route = self.routes[method]
        value = route.load(params)
        if route.mark is not None:
            route.mark(value)
        return route.handler(value)

    def _mark_closing(self, params):
        """Runs in the reader as session/close is read (Route.mark): the session's turn is
        cancelled before any later line, so an approval answer read after the close (even
        in the same chunk) cannot allow. The close itself runs in its own greenlet."""
        self.face.manager.mark_closing(params["session_id"])

    def _mark_prompt(self, params):
        """Runs in the reader as session/prompt is read (Route.mark): a session/cancel read
        after it (even in the same write, before the prompt's greenlet has run) cancels
        this prompt, which then ends ``cancelled`` instead of running."""
        params["ticket"] = self.face.manager.prompt_read(params["session_id"])

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
        self.initialized = True
        if version == m.PROTOCOL_V1:
            self.client_files = ClientFiles(params["client_capabilities"])
            self.terminal_auth = terminal_auth(params["client_capabilities"], 1)
            self.client_compaction = advertises_compaction(params["client_capabilities"])
            self.client_terminal_meta = terminal_output_meta(params["client_capabilities"])
            self.client_elicitation = ElicitationSupport(params["client_capabilities"])
            answer = self._v1_answer()
        else:
            self.terminal_auth = terminal_auth(params["capabilities"], 2)
            self.client_compaction = advertises_compaction(params["capabilities"])
            self.client_elicitation = ElicitationSupport(params["capabilities"])
            prompt = {"embeddedContext": {}}
            if self.accepts_images():
                prompt["image"] = {}
            answer = {"protocolVersion": m.PROTOCOL_VERSION, "info": dict(AGENT_INFO),
                      "capabilities": {"session": {"prompt": prompt,
                                                   "mcp": {"stdio": {}, "http": {}},
                                                   "fork": {}, "delete": {},
                                                   "additionalDirectories": {}}},
                      "authMethods": self._auth_methods(2), "_meta": dict(STEERING_META)}
        return answer

    def _v1_answer(self):
        prompt = {"embeddedContext": True}
        if self.accepts_images():
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
            "authMethods": self._auth_methods(1),
            "_meta": dict(STEERING_META),
        }


def _route(handler, schema, inline=False, quick=False):
    return Route(handler, functools.partial(load, schema), inline, quick=quick)
