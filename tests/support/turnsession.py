"""Stand-ins for ``sessions.live.LiveSession`` in unit tests that drive the turn layer
without the store or the protocol: :class:`TurnSessionStub` has every name of
``turns/session.py``'s ``TurnSession`` (the live session's defaults); :class:`FakeSession`
adds a running prompt's lifecycle and records what is emitted."""

from gevent.pool import Group

from term2acp.core.access import AccessState
from term2acp.lsp.registry import SessionServers
from term2acp.sessions.lifecycle import RUNNING, Lifecycle
from term2acp.tools.shell_state import SessionShell


class TurnSessionStub:
    def __init__(self, root="/w", store=None):
        self.id, self.root, self.extra_roots, self.workdir = "s1", root, (), root
        self.access, self.store = AccessState(root), store
        self.lifecycle = self.recording = self.provider = self.provider_id = None
        self.group, self.config_options, self.editor, self.images = Group(), None, None, False
        self.context_window = self.prompt_message_id = self.sandbox_note = self.mcp = None
        self.mcp_servers, self.closed = [], False
        self.model, self.effort, self.mode, self.title, self.title_manual = (
            "m", "default", "auto", None, False)
        self.history, self.history_rows, self.cost, self.interaction_seq = [], 0, 0.0, 0
        self.window_learned, self.steering, self.checkpoint = None, [], None
        self.context_size = self.request_view = self.notes_told = self.instructions = None
        self.skills = self.file_commands = self.hooks = self.project_mcp = self.trust = None
        self.events = []
        # what the session owns (nothing runs until a tool uses them)
        self.shell, self.language_servers = SessionShell(), SessionServers()

    @property
    def stopping(self):
        return self.lifecycle is not None and self.lifecycle.stopping

    def commit(self):
        if self.store is not None:
            self.store.commit(self.id)

    def emit(self, event):
        self.events.append(event)

    def append_history(self, message):
        self.history.append(message)
        self.store_history(message)

    def store_history(self, message):
        self.history_rows += 1
        if self.store is not None:
            self.store.append_history(self.id, message)


class FakeSession(TurnSessionStub):
    def __init__(self, root, gate=None):
        super().__init__(root)
        self.lifecycle = Lifecycle(self.id, self.emit)  # the real state machine, running
        self.lifecycle.admit()
        self.lifecycle.state, self.lifecycle.gate = RUNNING, gate
        self.context_window = 1000
