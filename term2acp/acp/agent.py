"""The ACP connection: lifecycle (initialize first, once, unbatched) and the route table.

Session methods are served by :class:`term2acp.acp.sessions.SessionHandlers`, built on the
first session call so that answering ``initialize`` stays cheap (start-up is what editors
wait for).
"""

import functools
import logging

from term2acp import __version__
from term2acp.acp import methods as m
from term2acp.acp.schemas import session as ss
from term2acp.acp.schemas.base import load
from term2acp.acp.schemas.initialize import InitializeRequestSchema
from term2acp.rpc.endpoint import Route
from term2acp.rpc.errors import InvalidRequestError

log = logging.getLogger(__name__)


class AcpAgent:
    def __init__(self, manager_factory, client, settings):
        self._manager_factory = manager_factory
        self._sessions = None
        self.client = client
        self.settings = settings
        self.initialized = False
        self.client_info = None
        self.on_initialized = None  # start-up work deferred until initialize is answered

        def route(name, schema, inline=False):
            return Route(functools.partial(self._session_call, name),
                         functools.partial(load, schema), inline)

        self.routes = {
            m.INITIALIZE: Route(self.initialize, functools.partial(load, InitializeRequestSchema()),
                                inline=True),
            m.SESSION_NEW: route("new_session", ss.NewSessionRequestSchema()),
            m.SESSION_LIST: route("list_sessions", ss.ListSessionsRequestSchema()),
            m.SESSION_RESUME: route("resume_session", ss.ResumeSessionRequestSchema()),
            m.SESSION_PROMPT: route("prompt", ss.PromptRequestSchema()),
            m.SESSION_CANCEL: route("cancel", ss.CancelNotificationSchema(), inline=True),
            m.SESSION_CLOSE: route("close_session", ss.CloseSessionRequestSchema()),
        }

    @property
    def sessions(self):
        if self._sessions is None:
            from term2acp.acp.sessions import SessionHandlers

            self._sessions = SessionHandlers(self._manager_factory(), self.client, self.settings)
        return self._sessions

    @property
    def manager(self):
        """The session manager, or None while no session method has arrived."""
        return self._sessions.manager if self._sessions is not None else None

    def _session_call(self, name, params):
        return getattr(self.sessions, name)(params)

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
        return self.routes.get(method)

    # ------------------------------------------------------------ handlers
    def initialize(self, params):
        self.initialized = True
        self.client_info = params["info"]
        if self.on_initialized is not None:
            self.on_initialized()
        return {"protocolVersion": m.PROTOCOL_VERSION,
                "info": {"name": "term2", "title": "term2", "version": __version__},
                "capabilities": {"session": {}}}
