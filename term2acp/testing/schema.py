"""Validate messages the agent sends against the official ACP JSON Schema of the
connection's version.

The schema files are the ones ``@agentclientprotocol/sdk@1.4.0`` validates with
(``schema/schema.json`` for v1, the default export; ``schema/v2/schema.unstable.json``
for v2), shipped here so the kit works offline.
"""

import functools
import json
import os

HERE = os.path.dirname(__file__)
SCHEMA_FILES = {1: os.path.join(HERE, "acp-v1-schema.json"),
                2: os.path.join(HERE, "acp-v2-schema.unstable.json")}
SCHEMA_FILE = SCHEMA_FILES[2]

RESULT_TYPES = {
    "initialize": "InitializeResponse",
    "session/new": "NewSessionResponse",
    "session/list": "ListSessionsResponse",
    "session/resume": "ResumeSessionResponse",
    "session/close": "CloseSessionResponse",
    "session/prompt": "PromptResponse",
    "session/set_config_option": "SetSessionConfigOptionResponse",
}
NOTIFICATION_TYPES = {"session/update": "UpdateSessionNotification",
                      "$/cancel_request": "CancelRequestNotification",
                      "elicitation/complete": "CompleteElicitationNotification"}
REQUEST_TYPES = {"session/request_permission": "RequestPermissionRequest",
                 "elicitation/create": "CreateElicitationRequest"}

# version -> (results by request method, notifications by method, agent requests by method)
TYPES = {
    2: (dict(RESULT_TYPES, **{"auth/login": "LoginAuthResponse",
                              "auth/logout": "LogoutAuthResponse"}),
        NOTIFICATION_TYPES, REQUEST_TYPES),
    1: (dict(RESULT_TYPES, **{"session/load": "LoadSessionResponse",
                              "authenticate": "AuthenticateResponse",
                              "logout": "LogoutResponse",
                              "session/set_mode": "SetSessionModeResponse"}),
        dict(NOTIFICATION_TYPES, **{"session/update": "SessionNotification"}),
        dict(REQUEST_TYPES, **{"fs/read_text_file": "ReadTextFileRequest",
                               "fs/write_text_file": "WriteTextFileRequest"})),
}


@functools.lru_cache(maxsize=None)
def _validator(definition, version=2):
    import jsonschema

    with open(SCHEMA_FILES[version], encoding="utf-8") as fh:
        schema = json.load(fh)
    root = {"$schema": schema.get("$schema"), "$defs": schema["$defs"],
            "$ref": f"#/$defs/{definition}"}
    klass = jsonschema.validators.validator_for(root)
    return klass(root, format_checker=klass.FORMAT_CHECKER)


def errors_for(definition, value, version=2):
    return [f"v{version} {definition}: {'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in _validator(definition, version).iter_errors(value)]


def check_message(message, request_methods, version=2):
    """Problems with one agent->client message; ``request_methods`` maps our ids to methods."""
    results, notifications, requests = TYPES[version]
    problems = []
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return [f"not a JSON-RPC 2.0 object: {message!r}"[:300]]
    if "method" in message:
        method = message["method"]
        params = message.get("params")
        definition = (requests if "id" in message else notifications).get(method)
        if definition is None:
            problems.append(f"unexpected agent method {method} (ACP v{version})")
        else:
            problems += errors_for(definition, params, version)
    elif "result" in message:
        definition = results.get(request_methods.get(_key(message.get("id"))))
        if definition:
            problems += errors_for(definition, message["result"], version)
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
