"""The client proxy: what the agent sends to the editor (either protocol version)."""

from term2acp.acp import methods


class ClientProxy:
    def __init__(self, peer):
        self._peer = peer  # rpc/peer.py
        # update(session_id, update, tag=None): one ``session/update``, one call (every
        # streamed chunk takes it); ``tag`` (``Lifecycle.chunk_tag``) lets the writer drop
        # it while queued once its turn is cancelled
        self.update = peer.notifier(methods.SESSION_UPDATE, ("sessionId", "update"))
        self.lines = peer.send_encoded  # updates encoded already (acp/replay.py)

    def call(self, method, params, timeout=None):
        """A request to the editor, answered or withdrawn: see :meth:`Peer.call`."""
        return self._peer.call(method, params, timeout)
