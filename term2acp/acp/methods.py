"""Every ACP wire method string, so each can be found with one grep."""

INITIALIZE = "initialize"
SESSION_NEW = "session/new"
SESSION_LIST = "session/list"
SESSION_RESUME = "session/resume"
SESSION_PROMPT = "session/prompt"
SESSION_CANCEL = "session/cancel"
SESSION_CLOSE = "session/close"
SESSION_FORK = "session/fork"
SESSION_DELETE = "session/delete"
SESSION_SET_CONFIG_OPTION = "session/set_config_option"
SESSION_STEERING = "_session/steering"  # codex-acp's: a prompt joins the running turn
AUTH_LOGIN = "auth/login"
AUTH_LOGOUT = "auth/logout"

SESSION_UPDATE = "session/update"
SESSION_REQUEST_PERMISSION = "session/request_permission"
ELICITATION_CREATE = "elicitation/create"
ELICITATION_COMPLETE = "elicitation/complete"

# ACP v1 only (gone in v2)
SESSION_LOAD = "session/load"
AUTHENTICATE = "authenticate"
LOGOUT = "logout"
SESSION_SET_MODE = "session/set_mode"
FS_READ_TEXT_FILE = "fs/read_text_file"
FS_WRITE_TEXT_FILE = "fs/write_text_file"

# The methods each face's route table serves (acp/v2/handlers.py, acp/v1/routes.py; a unit test
# keeps them equal): one read before the face is built is served in its own greenlet once
# it is, so the reader never waits for the session store to open.
V2_FACE = frozenset({SESSION_NEW, SESSION_LIST, SESSION_RESUME, SESSION_PROMPT, SESSION_CANCEL,
                     SESSION_CLOSE, SESSION_FORK, SESSION_DELETE, SESSION_SET_CONFIG_OPTION,
                     AUTH_LOGIN, AUTH_LOGOUT, SESSION_STEERING})
V1_FACE = frozenset({SESSION_NEW, SESSION_LOAD, SESSION_LIST, SESSION_RESUME, SESSION_PROMPT,
                     SESSION_CANCEL, SESSION_CLOSE, SESSION_FORK, SESSION_DELETE, AUTHENTICATE,
                     LOGOUT, SESSION_SET_MODE, SESSION_SET_CONFIG_OPTION, SESSION_STEERING})

PROTOCOL_VERSION = 2  # the latest version we speak; 2 and above get the v2 face
PROTOCOL_V1 = 1

# Calls that change the connection's lifecycle must not travel inside a batch.
UNBATCHABLE = frozenset({INITIALIZE})
