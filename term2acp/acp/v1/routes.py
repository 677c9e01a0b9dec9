"""The v1 route table: what a connection that initialized with version 1 can call."""

from term2acp.acp import methods as m
from term2acp.acp.schemas import controls as cs
from term2acp.acp.schemas import session as ss
from term2acp.acp.v1 import schemas as v1


def routes(face, route):
    """The Routes of ``face`` (a V1SessionHandlers): ``route(bound method, schema,
    inline=False)`` builds each (see acp/agent.py)."""
    return {
        m.SESSION_NEW: route(face.new_session, v1.NewSessionRequestSchema()),
        m.SESSION_LOAD: route(face.load_session, v1.LoadSessionRequestSchema()),
        m.SESSION_LIST: route(face.list_sessions, ss.ListSessionsRequestSchema()),
        m.SESSION_RESUME: route(face.resume_session, v1.ResumeSessionRequestSchema()),
        m.SESSION_PROMPT: route(face.prompt, ss.PromptRequestSchema()),
        m.SESSION_CANCEL: route(face.cancel, ss.CancelNotificationSchema(), inline=True),
        m.SESSION_CLOSE: route(face.close_session, ss.CloseSessionRequestSchema()),
        m.AUTHENTICATE: route(face.authenticate, cs.LoginRequestSchema()),
        m.LOGOUT: route(face.logout, cs.LogoutRequestSchema()),
        m.SESSION_SET_MODE: route(face.set_mode, cs.SetModeRequestSchema()),
        m.SESSION_SET_CONFIG_OPTION: route(face.set_config_option,
                                           cs.SetConfigOptionRequestSchema()),
    }
