"""The three points where a live session meets its MCP servers (used by sessions/manager).

* :func:`connect` on session/new, resume and load: (re)start the servers the client sent,
  in the background (returns at once); the previous hub of that session, if any, closes.
* :func:`turn_tools` at the start of a turn: wait for pending handshakes (bounded), tell
  the user once about servers that failed or stopped, and return the turn's live tool
  mapping (our tools plus the MCP tools, refreshed before every model request).
* :func:`close` when the session is released: stop every server, bounded;
  :func:`close_all` for shutdown: every session's servers in parallel.

The configs live on ``session.mcp_servers``, the running hub on ``session.mcp``.
"""

import logging

from gevent.pool import Group

from term2acp.core import events as ev
from term2acp.mcp.client import CALL_TIMEOUT
from term2acp.mcp.hub import CLOSE_TIMEOUT, READY_TIMEOUT, McpHub
from term2acp.mcp.offer import MAX_TOOLS
from term2acp.settings import McpSettings

log = logging.getLogger(__name__)


def connect(session, configs, call_timeout=CALL_TIMEOUT, data_dir=None):
    """Start ``configs`` for the session (the previous servers stop); returns at once.
    ``data_dir`` keeps the remote servers' sign-ins (``tokens.py``)."""
    close(session)
    session.mcp_servers = list(configs or ())
    session.mcp_data_dir = data_dir
    _start(session, call_timeout)


def _start(session, call_timeout=CALL_TIMEOUT):
    if session.mcp_servers:
        hub = McpHub(session.mcp_servers, session.root, call_timeout=call_timeout,
                     data_dir=session.mcp_data_dir,
                     on_commands=lambda: _commands_changed(session),
                     gate=lambda: session.lifecycle.gate)
        session.mcp = hub.start()
        log.info("session %s: connecting MCP servers %s", session.id,
                 ", ".join(c.name for c in session.mcp_servers))


def _commands_changed(session):
    """The editor hears the session's commands again (the face sends nothing before the
    start's first list, sent after the session/new answer, which must come first)."""
    session.emit(ev.CommandsChanged())


def turn_tools(session, builtin, new_id, ready_timeout=READY_TIMEOUT, call_timeout=CALL_TIMEOUT,
               settings=None):
    """``builtin`` plus the session's MCP tools on offer (``settings``: the ``[mcp]``
    section, its ``tools`` choice and ``max_tools``); emits one agent message with any
    notices, tools left out of the offer included (once per change).

    A session whose servers were stopped while it idled (and is used again) restarts them.
    """
    if not session.mcp_servers:
        return builtin
    if session.mcp is None:
        _start(session, call_timeout)
    hub = session.mcp
    hub.wait_ready(ready_timeout)
    settings = settings or McpSettings()
    tools = hub.merged(builtin, settings.tools, settings.max_tools or MAX_TOOLS)
    notices = hub.notices()
    left_out = hub.left_out_news(tools.offer().notice())
    if left_out:
        notices.append(left_out)
    if notices:
        session.emit(ev.TextChunk(new_id("msg"), "\n".join(f"Note: {n}" for n in notices) + "\n\n"))
    return tools


def close(session):
    """Stop the session's servers (``mcp_servers`` is kept: an idle-closed session that is
    used again restarts them)."""
    hub = session.mcp
    session.mcp = None
    if hub:
        try:
            hub.close()
        except Exception:  # noqa: BLE001 - a failing close must not stop the session's release
            log.exception("session %s: closing MCP servers failed", session.id)


def close_all(sessions, timeout=CLOSE_TIMEOUT):
    """Stop the servers of many sessions in parallel (shutdown, disconnect), bounded."""
    group = Group()
    for session in sessions:
        if session.mcp:
            group.spawn(close, session)
    group.join(timeout=timeout)
    group.kill(block=True, timeout=1)
