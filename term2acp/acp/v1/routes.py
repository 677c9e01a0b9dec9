"""The v1 route table: what a connection that initialized with version 1 can call."""

from term2acp.acp import methods as m
from term2acp.acp.schemas import controls as cs
from term2acp.acp.schemas import session as ss
from term2acp.acp.v1 import schemas as v1


def routes(route):
    """``route(handler name, schema, inline=False)`` builds each Route (see acp/agent.py)."""
    return {
        m.SESSION_NEW: route("new_session", v1.NewSessionRequestSchema()),
        m.SESSION_LOAD: route("load_session", v1.LoadSessionRequestSchema()),
        m.SESSION_LIST: route("list_sessions", ss.ListSessionsRequestSchema()),
        m.SESSION_RESUME: route("resume_session", v1.ResumeSessionRequestSchema()),
        m.SESSION_PROMPT: route("prompt", ss.PromptRequestSchema()),
        m.SESSION_CANCEL: route("cancel", ss.CancelNotificationSchema(), inline=True),
        m.SESSION_CLOSE: route("close_session", ss.CloseSessionRequestSchema()),
        m.AUTHENTICATE: route("authenticate", cs.LoginRequestSchema()),
        m.LOGOUT: route("logout", cs.LogoutRequestSchema()),
        m.SESSION_SET_MODE: route("set_mode", cs.SetModeRequestSchema()),
        m.SESSION_SET_CONFIG_OPTION: route("set_config_option",
                                           cs.SetConfigOptionRequestSchema()),
    }
