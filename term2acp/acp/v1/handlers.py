"""v1 session handlers: new, load (+replay), list, resume, prompt, cancel, close, authenticate.

The runtime is the one the v2 face drives (``sessions/manager.py``); what differs is the
edge. ``session/prompt`` answers when the turn ends, with ``{stopReason}`` (every update
of the turn is queued before it); a failed turn is a JSON-RPC error on the prompt. Events
become v1 updates through one :class:`~term2acp.acp.v1.translate.SessionView` per session.
"""

import logging

import gevent
from gevent.event import Event

from term2acp.acp.errors import domain_errors
from term2acp.acp.handlers import BaseHandlers, shared_updates, steered
from term2acp.acp.replay import send as replay_journal
from term2acp.acp.v1.replay import v1_updates
from term2acp.acp.v1 import permissions, translate
from term2acp.acp.v1.files import EditorFiles
from term2acp.acp.v2.handlers import V2Handlers
from term2acp.acp.v2.permissions import PermissionBridge
from term2acp.acp.v2.translate import CHUNK_EVENTS
from term2acp.core import events as ev
from term2acp.core.ids import new_id
from term2acp.rpc.errors import InternalError
from term2acp.sessions.errors import SessionBusy, SessionLocked, SessionNotFound
from term2acp.sessions.facelink import FaceLink

log = logging.getLogger(__name__)

# Prompts a v1 session holds while its turn runs (Toad sends a prompt typed meanwhile at
# once, and ends the conversation on an error); one more is refused as busy.
HELD_PROMPTS = 8


class _Held:
    """A prompt waiting for its session's turn: woken to run, or cancelled."""

    __slots__ = ("woken", "cancelled")

    def __init__(self):
        self.woken = Event()
        self.cancelled = False


class V1Handlers(BaseHandlers):
    VERSION = 1

    def __init__(self, manager, client, settings, capabilities):
        super().__init__(manager, client, settings, capabilities)
        self.terminal_meta = capabilities.terminal_meta  # Zed's terminal (_meta)
        self._held = {}  # session id -> [_Held], oldest first

    # ------------------------------------------------------------ plumbing
    def _link(self, capabilities):
        """A failed turn is said once, as the prompt's error; the tools read and write
        through the editor's fs/* where it offers them."""
        files = capabilities.files
        if not (files.read or files.write):
            return FaceLink(self._sink, self.config_options, failures_as_errors=True)

        def editor(session_id):
            return EditorFiles(self.client, session_id, files.read, files.write,
                               self.settings.approval_timeout)

        return FaceLink(self._sink, self.config_options, editor, failures_as_errors=True)

    def _attach(self, session, mcp_servers):
        record = self._face_session(session.id)
        if record.view is None:
            record.view = translate.SessionView(session.root, self.compaction,
                                                self.terminal_meta)
        self.manager.connect_mcp(session, mcp_servers)

    def _sink(self, session, event):
        record = self._sessions.get(session.id)
        view = record.view if record is not None else None
        if view is None:
            return
        if type(event) is ev.CommandsChanged:  # the MCP servers' prompts or sign-in
            self._commands_changed(session)
            return
        shared = shared_updates(session, event, 1)  # config options, modes, plans
        if shared is not None:
            for update in shared:
                self.client.update(session.id, update)
            return
        if type(event) is ev.StateChanged:  # v1 has no state updates: the prompt answers
            if event.state == "idle":
                view.turn_ended()
            return
        tag = session.lifecycle.chunk_tag() if type(event) in CHUNK_EVENTS else None
        for update in view.updates(event):
            self.client.update(session.id, update, tag=tag)
        while view.flush_wanted:
            terminal_id = view.flush_wanted.pop()
            session.group.spawn(self._flush_later, session.id, view, terminal_id)

    def _flush_later(self, session_id, view, terminal_id):
        """Output held back by the interval goes out once it has passed."""
        gevent.sleep(translate.FLUSH_INTERVAL)
        for update in view.flush(terminal_id):
            self.client.update(session_id, update)

    def _release(self, session_id):
        self._forget(session_id)
        self._cancel_held(session_id)

    # ------------------------------------------------------------ lifecycle
    @domain_errors
    def new_session(self, params):
        session = self.manager.new(params["cwd"], self.link)
        session.set_roots(params["additional_directories"])
        self._attach(session, params["mcp_servers"])
        result = self.setup_result(session, {"sessionId": session.id})
        self.started(session)
        return result

    @domain_errors
    def load_session(self, params):
        """Attach a stored session and replay its whole history, then answer."""
        session, _already = self.manager.resume(params["session_id"], params["cwd"],
                                               self.link)
        session.set_roots(params["additional_directories"])
        self._attach(session, params["mcp_servers"])
        terminals = list(self.manager.journal(session, ("terminal",)))
        replay_journal(self.manager, self.client, session, 1,
                       v1_updates(terminals, self.compaction, self.terminal_meta))
        result = self.setup_result(session, {})
        self.started(session, replayed=True)
        return result

    @domain_errors
    def resume_session(self, params):
        session, _already = self.manager.resume(params["session_id"], params["cwd"],
                                               self.link)
        session.set_roots(params["additional_directories"])
        self._attach(session, params["mcp_servers"])
        result = self.setup_result(session, {})
        self.started(session)
        return result

    list_sessions = V2Handlers.list_sessions  # one implementation for both faces
    fork_session = V2Handlers.fork_session

    def attach_forked(self, session, mcp_servers):
        self._attach(session, mcp_servers)

    @domain_errors
    def delete_session(self, params):
        try:
            self.manager.delete(params["session_id"])
        except SessionNotFound:
            pass  # deleting an unknown session succeeds (as v2's delete)
        finally:
            self._release(params["session_id"])
        return {}

    @domain_errors
    def close_session(self, params):
        session_id = params["session_id"]
        self._cancel_held(session_id)  # answered while the turn is cancelled, before this
        try:
            if not self.manager.close(session_id, self.settings.shutdown_timeout):
                raise InternalError("cancelling the session's work failed; the session was "
                                    "closed")
        finally:
            self._release(session_id)
        return {}

    def cancel(self, params):
        """Cancels the running turn and every prompt held behind it."""
        self._cancel_held(params["session_id"])
        self.manager.cancel(params["session_id"])

    def authenticate(self, params):
        return self.login(params)

    # ------------------------------------------------------------ prompt
    @domain_errors
    def prompt(self, params):
        """Run one turn; answer ``{stopReason}`` when it has ended. A prompt that arrives
        while the session's turn runs is held and runs after it, in arrival order."""
        session_id = params["session_id"]
        if steered(params):  # it joins the running turn and is answered as that turn ends
            ended = self.manager.steer(session_id, params["prompt"], params.get("ticket"))
            if ended is not None:
                return _prompt_result(ended.get())
        try:
            session = self._admit(session_id, params.get("ticket"))
        except SessionLocked:
            told = self.manager.taken_over_once(session_id)
            if told is None:
                raise
            self.client.update(session_id, {"sessionUpdate": "agent_message_chunk",
                                            "messageId": new_id("msg"),
                                            "content": {"type": "text", "text": told}})
            return {"stopReason": "end_turn"}
        finally:
            self._wake_next(session_id)  # as an admitted prompt's slot is taken, or lost
        if session is None:
            return {"stopReason": "cancelled"}
        try:
            return self._run(session, params)
        finally:
            self._wake_next(session_id)

    def _admit(self, session_id, ticket):
        """The admitted session, or None when the prompt was cancelled while held."""
        held = self._held.get(session_id)
        try:
            if held:  # others wait already: no overtaking
                raise SessionBusy(session_id)
            return self.manager.admit(session_id, ticket)
        except SessionBusy:
            held = self._held.setdefault(session_id, [])
            if len(held) >= HELD_PROMPTS:
                raise
        entry = _Held()
        held.append(entry)
        try:
            entry.woken.wait()  # woken as the turn ahead of it ends, or cancelled
            if entry.cancelled:
                return None
            return self.manager.admit(session_id, ticket)
        finally:
            if entry in held:
                held.remove(entry)
            if not held and self._held.get(session_id) is held:
                del self._held[session_id]

    def _wake_next(self, session_id):
        """Let the oldest held prompt try its turn, unless the session is busy again."""
        held = self._held.get(session_id)
        if held and not held[0].woken.is_set():
            session = self.manager.live.get(session_id)
            if session is None or not session.busy:
                held[0].woken.set()

    def _cancel_held(self, session_id):
        for entry in self._held.pop(session_id, ()):
            entry.cancelled = True
            entry.woken.set()

    def _run(self, session, params):
        blocks = params["prompt"]  # images: turns/content.py refuses them (-32602) unless
        # the model takes them
        self.announced(session)
        text = self.manager.prepare(session, blocks)
        gate = PermissionBridge(self.client, session.id, self.settings.approval_timeout,
                                params_for=permissions.request_params,
                                questions=self.questions)
        ended = self.manager.start(session, blocks, text, gate)
        try:
            outcome = ended.get()  # set after the idle transition's updates were queued
        except BaseException:
            if not ended.ready():  # this request was cancelled ($/cancel_request, shutdown)
                self.manager.cancel(session.id)
            raise
        return _prompt_result(outcome, outcome.told)


def _prompt_result(outcome, told=None):
    """The v1 answer to session/prompt for the turn's Outcome (sessions/lifecycle.py);
    ``told``: what the failure means and what to do (turns/failures.py)."""
    if outcome.reason == "failed":
        error = outcome.error or "unknown error"
        raise InternalError(told or f"The turn failed: {error}.", data={"error": error})
    reason = outcome.reason
    result = {"stopReason": reason if reason in translate.STOP_REASONS else "end_turn"}
    if outcome.usage:
        result["usage"] = translate.usage_of(outcome.usage)
    return result
