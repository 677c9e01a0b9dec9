"""``session/request_permission`` in v1 form: ``{sessionId, toolCall, options}``.

Only the shape differs from v2: the bridge, the option table and every fail-closed rule
are the ones in ``acp/v2/permissions.py``.
"""

from term2acp.acp.v1.translate import tool_fields


def request_params(session_id, interaction):
    tool_call = {"toolCallId": interaction.call_id,
                 "title": interaction.title or "Allow this tool call?"}
    tool_fields(tool_call, {"kind": interaction.kind, "status": "pending",
                            "raw_input": interaction.raw_input,
                            "locations": interaction.locations or None,
                            "content": interaction.content or None,
                            "parent": interaction.parent})
    params = {
        "sessionId": session_id,
        "toolCall": tool_call,
        "options": [{"optionId": cid, "name": label, "kind": kind}
                    for cid, label, kind in interaction.choices],
    }
    if interaction.parent:  # a sub-agent asks: the request names its agent call
        params["_meta"] = dict(tool_call["_meta"])
    return params
