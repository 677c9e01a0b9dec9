"""The v2 route table: what a connection that initialized with version 2 can call."""

from term2acp.acp import methods as m
from term2acp.acp.schemas import config_options as cs
from term2acp.acp.schemas import signin as auth_schemas
from term2acp.acp.schemas import session as ss


# Built once, when this module is imported (before the first line is read), not when the
# face is: the first session/new right after initialize would wait for them.
_SCHEMAS = {
    m.SESSION_NEW: ss.NewSessionRequestSchema(),
    m.SESSION_LIST: ss.ListSessionsRequestSchema(),
    m.SESSION_RESUME: ss.ResumeSessionRequestSchema(),
    m.SESSION_PROMPT: ss.PromptRequestSchema(),
    m.SESSION_STEERING: ss.PromptRequestSchema(),
    m.SESSION_CANCEL: ss.CancelNotificationSchema(),
    m.SESSION_CLOSE: ss.CloseSessionRequestSchema(),
    m.SESSION_FORK: ss.ForkSessionRequestSchema(),
    m.SESSION_DELETE: ss.DeleteSessionRequestSchema(),
    m.SESSION_SET_CONFIG_OPTION: cs.SetConfigOptionRequestSchema(),
    m.AUTH_LOGIN: auth_schemas.LoginRequestSchema(),
    m.AUTH_LOGOUT: auth_schemas.LogoutRequestSchema(),
}


def routes(face, route):
    """The v2 route table of ``face`` (a V2Handlers): ``route(bound method, schema,
    inline=False, quick=False, mark=None, wrap=None)`` builds each as declared here (see
    ``acp/connection.py``'s ``_route``; v1's table is ``acp/v1/routes.py``). Every route
    but an ``inline`` one (it runs in the reader) first waits, in its own greenlet, until
    the session store is open."""
    s = _SCHEMAS
    return {
        m.SESSION_NEW: route(face.new_session, s[m.SESSION_NEW], wrap=face.creating),
        m.SESSION_LIST: route(face.list_sessions, s[m.SESSION_LIST], quick=True),
        m.SESSION_RESUME: route(face.resume_session, s[m.SESSION_RESUME]),
        m.SESSION_PROMPT: route(face.prompt, s[m.SESSION_PROMPT], mark=face.mark_prompt),
        m.SESSION_STEERING: route(face.steering, s[m.SESSION_STEERING]),
        m.SESSION_CANCEL: route(face.cancel, s[m.SESSION_CANCEL], inline=True),
        m.SESSION_CLOSE: route(face.close_session, s[m.SESSION_CLOSE],
                                 mark=face.mark_closing),
        m.SESSION_FORK: route(face.fork_session, s[m.SESSION_FORK]),
        m.SESSION_DELETE: route(face.delete_session, s[m.SESSION_DELETE]),
        m.SESSION_SET_CONFIG_OPTION: route(face.set_config_option,
                                           s[m.SESSION_SET_CONFIG_OPTION]),
        m.AUTH_LOGIN: route(face.login, s[m.AUTH_LOGIN]),
        m.AUTH_LOGOUT: route(face.logout, s[m.AUTH_LOGOUT]),
    }
