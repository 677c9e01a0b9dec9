"""The client proxy: what the agent sends to the editor (either protocol version)."""

from term2acp.acp import methods


class ClientProxy:
    def __init__(self, endpoint):
        self._endpoint = endpoint

    def update(self, session_id, update):
        self._endpoint.notify(methods.SESSION_UPDATE, {"sessionId": session_id, "update": update})

    def call(self, method, params, timeout=None):
        """A request to the editor, answered or withdrawn: see :meth:`Endpoint.call`."""
        return self._endpoint.call(method, params, timeout)
