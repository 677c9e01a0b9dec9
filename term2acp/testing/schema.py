"""Validate messages the agent sends against the official ACP v2 JSON Schema.

The schema file is the one ``@agentclientprotocol/sdk@1.4.0`` validates with
(``schema/v2/schema.unstable.json``), shipped here so the kit works offline.
"""

import functools
import json
import os

SCHEMA_FILE = os.path.join(os.path.dirname(__file__), "acp-v2-schema.unstable.json")

RESULT_TYPES = {
    "initialize": "InitializeResponse",
    "session/new": "NewSessionResponse",
    "session/list": "ListSessionsResponse",
    "session/resume": "ResumeSessionResponse",
    "session/close": "CloseSessionResponse",
    "session/prompt": "PromptResponse",
}
NOTIFICATION_TYPES = {"session/update": "UpdateSessionNotification"}
REQUEST_TYPES = {"session/request_permission": "RequestPermissionRequest"}


@functools.lru_cache(maxsize=None)
def _validator(definition):
    import jsonschema

    with open(SCHEMA_FILE, encoding="utf-8") as fh:
        schema = json.load(fh)
    root = {"$schema": schema.get("$schema"), "$defs": schema["$defs"],
            "$ref": f"#/$defs/{definition}"}
    klass = jsonschema.validators.validator_for(root)
    return klass(root, format_checker=klass.FORMAT_CHECKER)


def errors_for(definition, value):
    return [f"{definition}: {'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in _validator(definition).iter_errors(value)]


def check_message(message, request_methods):
    """Problems with one agent->client message; ``request_methods`` maps our ids to methods."""
    problems = []
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return [f"not a JSON-RPC 2.0 object: {message!r}"[:300]]
    if "method" in message:
        method = message["method"]
        params = message.get("params")
        if "id" in message:
            definition = REQUEST_TYPES.get(method)
        else:
            definition = NOTIFICATION_TYPES.get(method)
            if method == "$/cancel_request":
                definition = "CancelRequestNotification"
        if definition is None:
            problems.append(f"unexpected agent method {method}")
        else:
            problems += errors_for(definition, params)
    elif "result" in message:
        definition = RESULT_TYPES.get(request_methods.get(_key(message.get("id"))))
        if definition:
            problems += errors_for(definition, message["result"])
    elif "error" in message:
        error = message["error"]
        if not isinstance(error, dict) or not isinstance(error.get("code"), int) \
                or not isinstance(error.get("message"), str):
            problems.append(f"malformed error object {error!r}")
    else:
        problems.append(f"neither request, notification nor response: {message!r}"[:300])
    return problems


def _key(value):
    return json.dumps(value)
