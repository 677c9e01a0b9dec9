"""Runtime exceptions -> JSON-RPC errors, for both protocol faces (``ERRORS``).

The runtime raises domain errors (``SessionNotFound``, ``SessionBusy`` ...); this is the
one place that decides which JSON-RPC error each becomes, whatever version the
connection speaks.
"""

import functools

from term2acp.turns.prompt import PromptError
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
    SessionBusy,
    SessionClosing,
    SessionLimit,
    SessionLocked,
    SessionNotFound,
    StoreError,
    UnknownMessage,
)
from term2acp.core.workspace import WorkspaceError


class SessionLockedError(RpcError):
    CODE = -32009
    MESSAGE = "Session is locked"


class SessionLimitError(RpcError):
    CODE = -32000
    MESSAGE = "Too many live sessions"


def _locked_message(pid, waited=None):
    if waited is not None:
        return (f"Session is open in another term2-acp process (pid {pid}), which did not let "
                f"it go within {waited:g}s: close it there (or end that process) and try again")
    return (f"Session is open in another term2-acp process (pid {pid}): load or resume it "
            "here to take it over (that process closes it), or close it there")


def _not_found(exc):
    return ResourceNotFoundError(f"Session not found: {exc.args[0]}",
                                 data={"sessionId": exc.args[0], "uri": f"session:{exc.args[0]}"})


ERRORS = {
    SessionNotFound: _not_found,
    SessionBusy: lambda exc: BusyError(),
    SessionClosing: lambda exc: InternalError(
        f"Session {exc.args[0]} was being closed here and {exc.args[1]}: try again",
        data={"sessionId": exc.args[0]}),
    SessionLocked: lambda exc: SessionLockedError(_locked_message(*exc.args)),
    CwdMismatch: lambda exc: InvalidParamsError(str(exc)),
    UnknownMessage: lambda exc: InvalidParamsError(
        f"unknown messageId {exc.args[0]!r}: the fork point must be the id of a user or agent "
        "message of the session", data={"messageId": exc.args[0]}),
    WorkspaceError: lambda exc: InvalidParamsError(str(exc)),
    PromptError: lambda exc: InvalidParamsError(str(exc)),
    CatalogError: lambda exc: InvalidParamsError(str(exc)),
    ProviderNotConfigured: lambda exc: AuthRequiredError(str(exc), data={
        "authRequired": True, "reason": "no usable API key for the model provider",
        "signIn": "set the provider's API key variable, or run term2-acp --login"}),
    StoreError: lambda exc: InternalError(str(exc)),
    SessionLimit: lambda exc: SessionLimitError(
        f"this term2-acp process already has {exc.args[0]} live sessions (the "
        "max_live_sessions setting); close sessions you no longer need with session/close, "
        "or raise max_live_sessions in config.toml", data={"maxLiveSessions": exc.args[0]}),
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
