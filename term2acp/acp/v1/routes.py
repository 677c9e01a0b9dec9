"""The v1 route table: what a connection that initialized with version 1 can call."""

from term2acp.acp import methods as m
from term2acp.acp.schemas import config_options as cs
from term2acp.acp.schemas import signin as auth_schemas
from term2acp.acp.schemas import session as ss
from term2acp.acp.v1 import schemas as v1


# Built once, when this module is imported (as v1 is negotiated), not when the face is
_SCHEMAS = {
    m.SESSION_NEW: v1.NewSessionRequestSchema(),
    m.SESSION_LOAD: v1.LoadSessionRequestSchema(),
    m.SESSION_LIST: ss.ListSessionsRequestSchema(),
    m.SESSION_RESUME: v1.ResumeSessionRequestSchema(),
    m.SESSION_PROMPT: ss.PromptRequestSchema(),
    m.SESSION_STEERING: ss.PromptRequestSchema(),
    m.SESSION_CANCEL: ss.CancelNotificationSchema(),
    m.SESSION_CLOSE: ss.CloseSessionRequestSchema(),
    m.SESSION_FORK: v1.ForkSessionRequestSchema(),
    m.SESSION_DELETE: ss.DeleteSessionRequestSchema(),
    m.AUTHENTICATE: auth_schemas.LoginRequestSchema(),
    m.LOGOUT: auth_schemas.LogoutRequestSchema(),
    m.SESSION_SET_MODE: cs.SetModeRequestSchema(),
    m.SESSION_SET_CONFIG_OPTION: cs.SetConfigOptionRequestSchema(),
}


def routes(face, route):
    """The Routes of ``face`` (a V1Handlers): ``route(bound method, schema,
    inline=False, quick=False, mark=None, wrap=None)`` builds each as declared here (see
    ``acp/connection.py``'s ``_route``). Every route but an ``inline`` one (it runs in the
    reader) first waits, in its own greenlet, until the session store is open."""
    s = _SCHEMAS
    return {
        m.SESSION_NEW: route(face.new_session, s[m.SESSION_NEW], wrap=face.creating),
        m.SESSION_LOAD: route(face.load_session, s[m.SESSION_LOAD]),
        m.SESSION_LIST: route(face.list_sessions, s[m.SESSION_LIST], quick=True),
        m.SESSION_RESUME: route(face.resume_session, s[m.SESSION_RESUME]),
        m.SESSION_PROMPT: route(face.prompt, s[m.SESSION_PROMPT], mark=face.mark_prompt),
        m.SESSION_STEERING: route(face.steering, s[m.SESSION_STEERING]),
        m.SESSION_CANCEL: route(face.cancel, s[m.SESSION_CANCEL], inline=True),
        m.SESSION_CLOSE: route(face.close_session, s[m.SESSION_CLOSE],
                                 mark=face.mark_closing),
        m.SESSION_FORK: route(face.fork_session, s[m.SESSION_FORK]),
        m.SESSION_DELETE: route(face.delete_session, s[m.SESSION_DELETE]),
        m.AUTHENTICATE: route(face.authenticate, s[m.AUTHENTICATE]),
        m.LOGOUT: route(face.logout, s[m.LOGOUT]),
        m.SESSION_SET_MODE: route(face.set_mode, s[m.SESSION_SET_MODE]),
        m.SESSION_SET_CONFIG_OPTION: route(face.set_config_option,
                                           s[m.SESSION_SET_CONFIG_OPTION]),
    }
