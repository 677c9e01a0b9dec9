"""Domain errors of the session layer (cheap to import: the protocol layer maps them)."""


class SessionNotFound(Exception):
    """No stored session has this id (or it is not live here, for prompts)."""


class SessionClosing(Exception):
    """The session was being closed here and that close failed or did not end in time;
    ``args``: (session id, why)."""


class SessionBusy(Exception):
    """The session already runs (or prepares) a foreground prompt."""


class CwdMismatch(ValueError):
    """The cwd given for a resume is not the session's workspace root."""


class SessionLocked(Exception):
    """The session is live in another process; ``args[0]`` is that process's pid, ``args[1]``
    (when given) how many seconds it was asked to let the session go, in vain."""


class UnknownMessage(ValueError):
    """A fork point that names no user or agent message of the session (``args[0]``)."""


class InvalidCursor(ValueError):
    """A session/list cursor this store did not mint."""


class StoreError(Exception):
    """The store cannot be used; the message says why and what to check."""


class StoreRecovered(StoreError):
    """The store file was damaged and moved aside; the message says where it went."""


class SessionLimit(Exception):
    """This process already has ``args[0]`` live sessions (``max_live_sessions``)."""
