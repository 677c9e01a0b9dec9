"""A stand-in for ``sessions.live.LiveSession`` with just what ``agent.turn.Turn`` uses,
for unit tests that drive a real turn without the store or the protocol."""

from term2acp.core.access import AccessState
from term2acp.sessions.lifecycle import RUNNING, Lifecycle


class FakeSession:
    def __init__(self, root, gate=None):
        self.id, self.root, self.model, self.effort = "s1", root, "m", "default"
        self.access = AccessState(root)
        self.history, self.events = [], []
        self.lifecycle = Lifecycle(self.id, self.emit)  # the real state machine, running
        self.lifecycle.admit()
        self.lifecycle.state, self.lifecycle.gate = RUNNING, gate
        self.interaction_seq = 0
        self.context_window = 1000
        self.cost = 0.0
        self.workdir = root

    @property
    def stopping(self):
        return self.lifecycle.stopping

    def commit(self):
        pass

    def emit(self, event):
        self.events.append(event)

    def append_history(self, message):
        self.history.append(message)
