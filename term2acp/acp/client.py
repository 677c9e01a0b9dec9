"""The client proxy: what the agent sends to the editor (either protocol version)."""

from term2acp.acp import methods


class ClientProxy:
    def __init__(self, endpoint):
        self._endpoint = endpoint

    def update(self, session_id, update):
        self._endpoint.notify(methods.SESSION_UPDATE, {"sessionId": session_id, "update": update})

    def request_permission(self, params):
        """Returns ``(request_id, AsyncResult)``; see :meth:`Endpoint.request`."""
        return self._endpoint.request(methods.SESSION_REQUEST_PERMISSION, params)

    def request(self, method, params):
        """Any other request to the editor (v1 ``fs/*``); ``(request_id, AsyncResult)``."""
        return self._endpoint.request(method, params)

    def cancel_request(self, request_id):
        self._endpoint.cancel_outgoing(request_id)
