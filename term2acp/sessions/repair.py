"""Repairs of what a killed process (``kill -9``, power loss) leaves in the store.

A turn killed during a tool call leaves an assistant message whose tool calls have no
result in the history (OpenAI-style servers then refuse every later request with HTTP 400)
and journal records of calls and terminals (foreground commands and background processes)
that never got a terminal state (replay would show them running forever). Both are closed as failed ("interrupted") when the session is
next attached.
"""

INTERRUPTED = "Interrupted: term2-acp stopped before this tool call finished."
TERMINAL = frozenset({"completed", "failed", "cancelled"})


def history(messages):
    """``(messages, repaired)``: each unanswered tool call gets an error result right after
    the results its assistant message already has."""
    out, repaired = [], False
    waiting = []  # calls of the last assistant message still without a result
    for message in messages:
        role = message.get("role") if isinstance(message, dict) else None
        if role == "tool":
            answered = message.get("tool_call_id")
            waiting = [call for call in waiting if call.get("id") != answered]
        else:
            repaired |= _close(out, waiting)
            waiting = list(_calls(message)) if role == "assistant" else []
        out.append(message)
    repaired |= _close(out, waiting)
    return out, repaired


def _calls(message):
    for call in message.get("tool_calls") or ():
        if isinstance(call, dict) and call.get("id") is not None:
            yield call


def _close(out, waiting):
    for call in waiting:
        out.append({"role": "tool", "tool_call_id": call["id"], "name": call.get("name"),
                    "content": INTERRUPTED, "is_error": True})
    return bool(waiting)


def journal(records):
    """``(kind, key, payload)`` to rewrite for records a killed process left open."""
    for kind, payload in records:
        if kind == "tool_call" and payload.get("status") not in TERMINAL:
            fixed = dict(payload, status="failed",
                         content=[{"type": "text", "text": INTERRUPTED}])
            yield kind, payload["call_id"], fixed
        elif kind == "terminal" and not payload.get("exit"):
            # a foreground or background command that was running then died with the
            # agent (sandbox/process.py: parent-death signal, pid namespace, and the
            # start-up sweeps of a dead agent's records and cgroups), so it was killed
            fixed = dict(payload, exit={"exit_code": None, "signal": "SIGKILL"})
            yield kind, "terminal:" + payload["terminal_id"], fixed
