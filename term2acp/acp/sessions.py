"""Session handlers: new, list, resume (+replay), prompt, cancel, close.

This module is one of the two translation points: runtime exceptions and outcomes
become JSON-RPC errors here (``ERRORS``), nowhere else.
"""

import functools
import logging

from term2acp.acp import translate
from term2acp.acp.permissions import PermissionBridge
from term2acp.agent import events as ev
from term2acp.agent.prompt import PromptError
from term2acp.providers.catalog import CatalogError
from term2acp.providers.errors import ProviderNotConfigured
from term2acp.rpc.errors import (
    AuthRequiredError,
    BusyError,
    InternalError,
    InvalidParamsError,
    ResourceNotFoundError,
    RpcError,
)
from term2acp.sessions.errors import (
    CwdMismatch,
    InvalidCursor,
    SessionBusy,
    SessionLocked,
    SessionNotFound,
    StoreError,
)
from term2acp.sessions.workspace import WorkspaceError

log = logging.getLogger(__name__)


class SessionLockedError(RpcError):
    CODE = -32009
    MESSAGE = "Session is locked"


def _not_found(exc):
    return ResourceNotFoundError(f"Session not found: {exc.args[0]}",
                                 data={"sessionId": exc.args[0], "uri": f"session:{exc.args[0]}"})


ERRORS = {
    SessionNotFound: _not_found,
    SessionBusy: lambda exc: BusyError(),
    SessionLocked: lambda exc: SessionLockedError(
        f"Session is open in another term2-acp process (pid {exc.args[0]}); close it there first"),
    CwdMismatch: lambda exc: InvalidParamsError(str(exc)),
    WorkspaceError: lambda exc: InvalidParamsError(str(exc)),
    PromptError: lambda exc: InvalidParamsError(str(exc)),
    CatalogError: lambda exc: InvalidParamsError(str(exc)),
    ProviderNotConfigured: lambda exc: AuthRequiredError(str(exc)),
    StoreError: lambda exc: InternalError(str(exc)),
}


def domain_errors(handler):
    @functools.wraps(handler)
    def wrapper(*args, **kwargs):
        try:
            return handler(*args, **kwargs)
        except tuple(ERRORS) as exc:
            for klass in type(exc).__mro__:
                if klass in ERRORS:
                    raise ERRORS[klass](exc) from None
            raise
    return wrapper


class SessionHandlers:
    def __init__(self, manager, client, settings):
        self.manager = manager
        self.client = client
        self.settings = settings

    def _sink(self, session, event):
        self.client.update(session.id, translate.update_for(event))

    @domain_errors
    def new_session(self, params):
        session = self.manager.new(params["cwd"])
        session.sink = self._sink
        return {"sessionId": session.id}

    @domain_errors
    def list_sessions(self, params):
        try:
            rows, cursor = self.manager.list(params["cwd"], params["cursor"])
        except InvalidCursor:
            raise InvalidParamsError("invalid cursor: pass a nextCursor value from an earlier "
                                     "session/list response") from None
        sessions = []
        for row in rows:
            info = {"sessionId": row["id"], "cwd": row["cwd"], "updatedAt": row["updated_at"]}
            if row["title"]:
                info["title"] = row["title"]
            sessions.append(info)
        result = {"sessions": sessions}
        if cursor:
            result["nextCursor"] = cursor
        return result

    @domain_errors
    def resume_session(self, params):
        replay = params["replay_from"]
        if replay is not None and replay.get("type") != "start":
            raise InvalidParamsError(f"unsupported replayFrom type {replay.get('type')!r}; "
                                     'use {"type": "start"} or omit it')
        session, _already = self.manager.resume(params["session_id"], params["cwd"])
        session.sink = self._sink
        if replay is not None:
            for kind, payload in self.manager.journal(session):
                update = translate.replay_update(kind, payload)
                if update is not None:
                    self.client.update(session.id, update)
        return {}

    @domain_errors
    def prompt(self, params):
        session = self.manager.admit(params["session_id"])
        text = self.manager.prepare(session, params["prompt"])
        if not session.cancel_requested:
            session.emit(ev.StateChanged("running"))
        gate = PermissionBridge(self.client, session.id, self.settings.approval_timeout)
        self.manager.start(session, params["prompt"], text, gate)
        return {}

    def cancel(self, params):
        self.manager.cancel(params["session_id"])

    @domain_errors
    def close_session(self, params):
        if not self.manager.close(params["session_id"], self.settings.shutdown_timeout):
            raise InternalError("cancelling the session's work failed; the session was closed")
        return {}
