"""The one translation from runtime events (and replay records) to ``session/update``s."""

import base64
import re
from difflib import unified_diff

from term2acp.core import events as ev

_HUNK_START = re.compile(r"([-+])(\d+)(?=[, ])")  # a hunk header's start lines
_TOOL_FIELDS = (("title", "title"), ("kind", "kind"), ("status", "status"),
                ("raw_input", "rawInput"), ("raw_output", "rawOutput"), ("name", "name"))


def _text(text):
    return {"type": "text", "text": text}


def patch_text(path, old, new, old_path=None, line=1):
    """A ``diff --git`` section for one file (absolute path behind the a/ b/ prefixes);
    ``old_path``: the file was moved from there; ``line``: where ``old`` and ``new`` start
    in the file (a big file's diff is its changed region only)."""
    old_lines = [] if old is None else old.splitlines(keepends=True)
    new_lines = [] if new is None else new.splitlines(keepends=True)
    before = old_path or path
    src = "/dev/null" if old is None else f"a{before}"
    dst = "/dev/null" if new is None else f"b{path}"
    head = [f"diff --git a{before} b{path}\n"]
    if old_path:
        head += [f"rename from {old_path}\n", f"rename to {path}\n"]
    elif old is None:
        head.append("new file mode 100644\n")
    elif new is None:
        head.append("deleted file mode 100644\n")
    body = []
    for text in unified_diff(old_lines, new_lines, src, dst, n=3):
        if line > 1 and text.startswith("@@ "):
            text = _HUNK_START.sub(lambda m: f"{m[1]}{int(m[2]) + line - 1}", text)
        body.append(text if text.endswith("\n") else text + "\n\\ No newline at end of file\n")
    if not body:
        body = [f"--- {src}\n", f"+++ {dst}\n"]
    return "".join(head + body)


def resource_link(item):
    """A display item ``{"type": "link", "uri", "name"}`` as a ``resource_link`` block."""
    return {"type": "resource_link", "uri": item["uri"], "name": item.get("name") or item["uri"]}


def tool_content(items):
    out = []
    for item in items:
        kind = item.get("type")
        if kind == "text":
            out.append({"type": "content", "content": _text(item["text"])})
        elif kind == "diff":
            old, new, path = item.get("old"), item.get("new"), item["path"]
            moved = item.get("old_path")
            operation = "move" if moved else "add" if old is None else \
                "delete" if new is None else "modify"
            change = {"operation": operation, "path": path, "fileType": "text"}
            if moved:
                change["oldPath"] = moved
            out.append({"type": "diff", "changes": [change], "patch": {
                "format": "git_patch", "text": patch_text(path, old, new, moved,
                                                          item.get("line", 1))}})
        elif kind == "link":
            out.append({"type": "content", "content": resource_link(item)})
        elif kind == "terminal":
            out.append({"type": "terminal", "terminalId": item["terminal_id"]})
    return out


def locations(items):
    out = []
    for loc in items:
        entry = {"path": loc["path"]}
        if loc.get("line") is not None:
            entry["line"] = int(loc["line"])
        out.append(entry)
    return out


def parent_meta(parent):
    """The ``_meta`` of a sub-agent's tool call or question: the agent call running it."""
    return {"term2": {"parentToolCallId": parent}}


def tool_call_update(call_id, fields):
    update = {"sessionUpdate": "tool_call_update", "toolCallId": call_id}
    if fields.get("parent"):
        update["_meta"] = parent_meta(fields["parent"])
    for key, wire in _TOOL_FIELDS:
        value = fields.get(key)
        if value is not None:
            update[wire] = value
    if fields.get("locations") is not None:
        update["locations"] = locations(fields["locations"])
    if fields.get("content") is not None:
        update["content"] = tool_content(fields["content"])
    return update


def _tool_event(e):
    return tool_call_update(e.call_id, {
        "title": e.title, "kind": e.kind, "status": e.status, "raw_input": e.raw_input,
        "raw_output": e.raw_output, "name": e.name, "locations": e.locations, "content": e.content,
        "parent": e.parent})


ERROR_STOP = "_term2_error"  # v2 stop reason of a failed turn; _meta.term2.error says why
STOPS = {"max_cost": "_term2_max_cost"}  # our own stop reasons (exec's --max-cost)


def _state(e):
    update = {"sessionUpdate": "state_update", "state": e.state}
    outcome = e.outcome
    if outcome is None:
        return update
    failed = outcome.reason == "failed"
    update["stopReason"] = ERROR_STOP if failed else STOPS.get(outcome.reason, outcome.reason)
    if outcome.usage:
        update["usage"] = usage_of(outcome.usage)
    if failed or outcome.run:
        meta = update["_meta"] = {"term2": dict(outcome.run or {})}
        if failed:
            meta["term2"]["error"] = outcome.error or "unknown error"
    return update


def usage_of(tokens):
    """The ``Usage`` of a settled turn's token counts (the same shape in v1 and v2)."""
    usage = {"totalTokens": tokens["input"] + tokens["output"],
             "inputTokens": tokens["input"], "outputTokens": tokens["output"]}
    if tokens.get("thought"):
        usage["thoughtTokens"] = tokens["thought"]
    if tokens.get("cached"):
        usage["cachedReadTokens"] = tokens["cached"]
    if tokens.get("cache_write"):
        usage["cachedWriteTokens"] = tokens["cache_write"]
    return usage


def _usage(e):
    update = {"sessionUpdate": "usage_update", "used": e.used, "size": e.size}
    if e.cost:
        update["cost"] = e.cost
    return update


def _info(e):
    update = {"sessionUpdate": "session_info_update"}
    if e.title is not None:
        update["title"] = e.title
    if e.updated_at is not None:
        update["updatedAt"] = e.updated_at
    return update


def _exit(e):
    status = {}
    if e.exit_code is not None and e.exit_code >= 0:
        status["exitCode"] = e.exit_code
    if e.signal:
        status["signal"] = e.signal
    return {"sessionUpdate": "terminal_update", "terminalId": e.terminal_id, "exitStatus": status}


# Event type -> its update (the common path of every event: one lookup, one call). Control
# events (config, plan) and compaction have their own builders (acp/handlers.py, below).
EVENTS = {
    ev.StateChanged: _state,
    ev.UserMessage: lambda e: {"sessionUpdate": "user_message", "messageId": e.message_id,
                               "content": e.content},
    ev.TextChunk: lambda e: {"sessionUpdate": "agent_message_chunk", "messageId": e.message_id,
                             "content": _text(e.text)},
    ev.ThoughtChunk: lambda e: {"sessionUpdate": "agent_thought_chunk", "messageId": e.message_id,
                                "content": _text(e.text)},
    ev.Notice: lambda e: {"sessionUpdate": "agent_message_chunk", "messageId": e.message_id,
                          "content": _text(e.text)},
    ev.ToolCallReported: _tool_event,
    ev.TerminalStarted: lambda e: {"sessionUpdate": "terminal_update", "terminalId": e.terminal_id,
                                   "command": e.command, "cwd": e.cwd},
    ev.TerminalOutput: lambda e: {"sessionUpdate": "terminal_output_chunk",
                                  "terminalId": e.terminal_id,
                                  "data": base64.b64encode(e.data).decode("ascii")},
    ev.TerminalExited: _exit,
    ev.UsageReported: _usage,
    ev.SessionInfoChanged: _info,
}


def compaction_update(compaction_id, status, summary=None, error=None, text=None,
                      supported=False):
    """A compaction as ``compaction_update`` when the client advertised compaction support
    (``capabilities.session.compaction``), else the agent message ``text`` (or nothing)."""
    if supported:
        update = {"sessionUpdate": "compaction_update", "compactionId": compaction_id,
                  "status": status}
        if status == "completed" and summary:
            update["summary"] = [_text(summary)]
        if status == "failed" and error:
            update["error"] = error
        return update
    if not text:
        return None
    return {"sessionUpdate": "agent_message_chunk", "messageId": f"msg_{compaction_id}",
            "content": _text(text)}


# Events whose updates the writer may drop once their turn is cancelled (see
# sessions/lifecycle.py chunk_tag): message and thought chunks, nothing else.
CHUNK_EVENTS = frozenset({ev.TextChunk, ev.ThoughtChunk})


def update_for(event, compaction=False):
    """The update for a runtime event (None: nothing to send). ``compaction``: the client
    advertised compaction support."""
    if type(event) is ev.CompactionReported:
        return compaction_update(event.compaction_id, event.status, event.summary, event.error,
                                 event.text, compaction)
    return EVENTS[type(event)](event)


def replayed_compaction(payload, supported):
    """A journaled compaction as its update (either version); one still in progress when
    the process stopped replays as cancelled."""
    status = payload["status"]
    if status == "in_progress":
        status = "cancelled"
    return compaction_update(payload["compaction_id"], status, payload.get("summary"),
                             payload.get("error"), payload.get("text"), supported)


def replay_update(kind, payload, compaction=False):
    """A journal record as the update that restores it on the client."""
    if kind == "compaction":
        update = replayed_compaction(payload, compaction)
        if update is not None and update["sessionUpdate"] == "agent_message_chunk":
            update = {"sessionUpdate": "agent_message", "messageId": update["messageId"],
                      "content": [update["content"]]}
        return update
    if kind == "user_message":
        return {"sessionUpdate": "user_message", "messageId": payload["message_id"],
                "content": payload["content"]}
    if kind in ("agent_message", "agent_thought"):
        return {"sessionUpdate": kind, "messageId": payload["message_id"],
                "content": [_text(payload["text"])]}
    if kind == "tool_call":
        return tool_call_update(payload["call_id"], payload)
    if kind == "terminal":
        update = {"sessionUpdate": "terminal_update", "terminalId": payload["terminal_id"],
                  "command": payload["command"], "cwd": payload["cwd"],
                  "output": {"data": payload["output"]}}
        if payload.get("exit"):
            update.update(_exit(ev.TerminalExited(payload["terminal_id"], **payload["exit"])))
        return update
    return None
