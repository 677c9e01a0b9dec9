"""Every ACP wire method string, so each can be found with one grep."""

INITIALIZE = "initialize"
SESSION_NEW = "session/new"
SESSION_LIST = "session/list"
SESSION_RESUME = "session/resume"
SESSION_PROMPT = "session/prompt"
SESSION_CANCEL = "session/cancel"
SESSION_CLOSE = "session/close"

SESSION_UPDATE = "session/update"
SESSION_REQUEST_PERMISSION = "session/request_permission"

PROTOCOL_VERSION = 2

# Calls that change the connection's lifecycle must not travel inside a batch.
UNBATCHABLE = frozenset({INITIALIZE})
