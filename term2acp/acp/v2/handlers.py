"""v2 session handlers: new, list, resume (+replay), prompt, cancel, close, fork, delete.

Runtime exceptions become JSON-RPC errors through ``acp/errors.py`` (shared with the v1
face in ``acp/v1/``).
"""

import logging

import gevent

from term2acp.acp.errors import domain_errors
from term2acp.acp.handlers import BaseHandlers, fork_point, shared_updates, steered
from term2acp.acp.replay import send as replay_journal
from term2acp.acp.replay import v2_updates
from term2acp.acp.v2 import translate
from term2acp.acp.v2.permissions import PermissionBridge
from term2acp.core import events as ev
from term2acp.core.ids import new_id
from term2acp.core.text import one_line
from term2acp.rpc.errors import InternalError, InvalidParamsError
from term2acp.sessions.errors import InvalidCursor, SessionLocked, SessionNotFound
from term2acp.sessions.lifecycle import Outcome

log = logging.getLogger(__name__)


class V2Handlers(BaseHandlers):
    VERSION = 2

    def _sink(self, session, event):
        """Every runtime event of this face's sessions (``LiveSession.emit``) -> its update."""
        kind = type(event)
        build = translate.EVENTS.get(kind)
        if build is not None:
            tag = session.lifecycle.chunk_tag() if kind in translate.CHUNK_EVENTS else None
            self.client.update(session.id, build(event), tag=tag)
            return
        if type(event) is ev.CommandsChanged:  # the MCP servers' prompts or sign-in
            self._commands_changed(session)
            return
        updates = shared_updates(session, event, 2)  # config options, plans
        if updates is None:
            update = translate.update_for(event, self.compaction)  # compaction
            updates = () if update is None else (update,)
        for update in updates:
            self.client.update(session.id, update)

    @domain_errors
    def new_session(self, params):
        session = self.manager.new(params["cwd"], self.link)
        session.set_roots(params["additional_directories"])
        self.manager.connect_mcp(session, params["mcp_servers"])
        result = self.setup_result(session, {"sessionId": session.id})
        self.started(session)
        return result

    @domain_errors
    def list_sessions(self, params):
        """session/list, for both faces (``acp/v1/handlers.py`` reuses it): the shapes are
        the same in v1 and v2. The MCP servers a session was last connected with (no
        secrets: ``ServerConfig.describe()``) are under ``_meta.term2.mcpServers``."""
        try:
            rows, cursor = self.manager.list(params["cwd"], params["cursor"])
        except InvalidCursor:
            raise InvalidParamsError("invalid cursor: pass a nextCursor value from an earlier "
                                     "session/list response") from None
        sessions = []
        for row in rows:
            info = {"sessionId": row["id"], "cwd": row["cwd"], "updatedAt": row["updated_at"]}
            title = one_line(row["title"] or "", 200)  # one stored before titles were filtered
            if title:
                info["title"] = title
            if row.get("mcp_servers"):
                info["_meta"] = {"term2": {"mcpServers": row["mcp_servers"]}}
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
        session, _already = self.manager.resume(params["session_id"], params["cwd"], self.link)
        session.set_roots(params["additional_directories"])
        self.manager.connect_mcp(session, params["mcp_servers"])
        if replay is not None:
            replay_journal(self.manager, self.client, session, 2,
                           v2_updates(self.compaction))
        result = self.setup_result(session, {})
        self.started(session, replayed=replay is not None)
        return result

    @domain_errors
    def prompt(self, params):
        if steered(params) and self.manager.steer(params["session_id"], params["prompt"],
                                                  params.get("ticket")) is not None:
            return {}  # it joined the running turn (turns/steering.py)
        try:
            session = self.manager.admit(params["session_id"], params.get("ticket"))
        except SessionLocked:
            told = self.manager.taken_over_once(params["session_id"])
            if told is None:
                raise
            gevent.spawn(self._tell_turn, params["session_id"], told)  # after the answer
            return {}
        self.announced(session)
        text = self.manager.prepare(session, params["prompt"])
        gate = PermissionBridge(self.client, session.id, self.settings.approval_timeout,
                                questions=self.questions)
        self.manager.start(session, params["prompt"], text, gate)  # the running update
        return {}  # the turn goes on; its idle state_update ends it (translate.py)

    def _tell_turn(self, session_id, text):
        """A turn that only says ``text`` (a session this process no longer holds)."""
        for event in (ev.StateChanged("running"), ev.TextChunk(new_id("msg"), text),
                      ev.StateChanged("idle", Outcome("end_turn"))):
            self.client.update(session_id, translate.EVENTS[type(event)](event))

    def cancel(self, params):
        self.manager.cancel(params["session_id"])

    @domain_errors
    def close_session(self, params):
        try:
            if not self.manager.close(params["session_id"], self.settings.shutdown_timeout):
                raise InternalError("cancelling the session's work failed; the session was "
                                    "closed")
        finally:
            self._forget(params["session_id"])
        return {}

    @domain_errors
    def fork_session(self, params):
        """session/fork (both faces): a new session with the history and choices of
        ``sessionId``, in the ``cwd`` the request names, without its grants."""
        with self.manager.undo_new_on_failure():
            session = self.manager.fork(params["session_id"], params["cwd"],
                                        fork_point(params["meta"]), self.link)
            session.set_roots(params["additional_directories"])
            self.attach_forked(session, params["mcp_servers"])
            result = self.setup_result(session, {"sessionId": session.id})
        self.started(session)
        return result

    def attach_forked(self, session, mcp_servers):
        self.manager.connect_mcp(session, mcp_servers)

    @domain_errors
    def delete_session(self, params):
        """session/delete (both faces): a live session is closed first; an unknown one
        succeeds silently, as the protocol's draft asks (deleting is idempotent)."""
        try:
            self.manager.delete(params["session_id"])
        except SessionNotFound:
            pass
        finally:
            self._forget(params["session_id"])
        return {}
