"""The one translation of runtime events (and replay records) into v1 ``session/update``s.

v1 says what v2 says (``acp/v2/translate.py``) in other shapes:

* the first report of a tool call is ``tool_call`` (``title`` required), later ones are
  ``tool_call_update``;
* a tool call's status has no ``cancelled``: a cancelled call is reported ``failed``;
* a diff is ``{type: "diff", path, oldText, newText}``;
* there are no agent-owned terminals: a shell command's output becomes the content of
  the tool call that runs it, a text block streamed as the command runs (at most every
  ``FLUSH_INTERVAL`` seconds, the last ``TERMINAL_TAIL`` characters), or, for a client
  that advertised ``_meta.terminal_output`` (Zed), the editor's terminal fed through the
  tool call's ``_meta`` (``acp/v1/terminal_meta.py``);
* there is no ``state_update``: the end of a turn is the ``session/prompt`` response
  (``acp/v1/handlers.py``), and the user's prompt is not echoed live (the editor shows
  it already); ``session/load`` replays it as ``user_message_chunk``s.
"""

import base64
import codecs
import time

from term2acp.acp.v2.translate import compaction_update, locations, parent_meta, \
    replayed_compaction, resource_link, usage_of
from term2acp.acp.v1 import terminal_meta
from term2acp.core import events as ev

STOP_REASONS = frozenset({"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"})
FINISHED = frozenset({"completed", "failed", "cancelled"})
TERMINAL_TAIL = 64 * 1024  # characters of a command's output shown in its tool call
FLUSH_INTERVAL = 0.1  # seconds between two streamed updates of one command's output


def _text(text):
    return {"type": "text", "text": text}


def _status(status):
    return "failed" if status == "cancelled" else status


def fenced(text):
    """A Markdown code block that no backtick run in ``text`` can close early."""
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}console\n{text}{'' if text.endswith(chr(10)) else chr(10)}{fence}"


class TerminalView:
    """One command's output as the text of its tool call (a bounded tail)."""

    def __init__(self, call_id, command):
        self.call_id = call_id  # the in-progress call that started it (None: unknown)
        self.command = command
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.text = ""
        self.cut = 0
        self.exit = None
        self.dirty = False
        self.sent_at = 0.0

    def add(self, data):
        self.text += self._decoder.decode(data)
        if len(self.text) > TERMINAL_TAIL:
            drop = len(self.text) - TERMINAL_TAIL
            self.cut += drop
            self.text = self.text[drop:]
        self.dirty = True

    def finish(self, exit_code=None, signal=None):
        self.text += self._decoder.decode(b"", final=True)
        if exit_code is not None and exit_code >= 0:
            self.exit = f"exit code {exit_code}"
        else:
            self.exit = f"killed by signal {signal or 'SIGKILL'}"

    def content(self):
        body = self.text
        if self.cut:
            body = f"[... {self.cut:,} earlier characters of output not shown ...]\n{body}"
        items = [{"type": "content", "content": _text(fenced(f"$ {self.command}\n{body}"))}]
        if self.exit:
            items.append({"type": "content", "content": _text(self.exit)})
        return items


def tool_content(items, terminals=None, shown=None):
    """Runtime display items as v1 ``ToolCallContent``. ``shown(terminal_id)``: the call
    whose editor terminal shows it (``terminal_meta``), or None: its text view."""
    out = []
    for item in items:
        kind = item.get("type")
        if kind == "text":
            out.append({"type": "content", "content": _text(item["text"])})
        elif kind == "diff":
            diff = {"type": "diff", "path": item["path"], "newText": item.get("new") or ""}
            if item.get("old") is not None:
                diff["oldText"] = item["old"]
            out.append(diff)
        elif kind == "link":
            out.append({"type": "content", "content": resource_link(item)})
        elif kind == "terminal":
            call_id = shown(item["terminal_id"]) if shown is not None else None
            view = (terminals or {}).get(item["terminal_id"])
            if call_id is not None:
                out.extend(terminal_meta.content(call_id))
            elif view is not None:
                out.extend(view.content())
    return out


def tool_fields(update, fields, terminals=None, shown=None):
    """Copy the runtime's tool-call fields that are set into a v1 update."""
    for key, wire in (("kind", "kind"), ("raw_input", "rawInput"), ("raw_output", "rawOutput"),
                      ("name", "name")):
        if fields.get(key) is not None:
            update[wire] = fields[key]
    if fields.get("status") is not None:
        update["status"] = _status(fields["status"])
    if fields.get("locations") is not None:
        update["locations"] = locations(fields["locations"])
    if fields.get("content") is not None:
        update["content"] = tool_content(fields["content"], terminals, shown)
    if fields.get("parent"):  # a sub-agent's call (terminal_meta adds its own keys)
        update.setdefault("_meta", {}).update(parent_meta(fields["parent"]))
    return update


class SessionView:
    """What one session's client has been told: which calls it knows, running commands."""

    def __init__(self, cwd=None, compaction=False, terminal_meta=False):
        self.cwd = cwd  # the session's root, where its commands run
        self.compaction = compaction  # the client advertised clientCapabilities.session.compaction
        self.terminal_meta = terminal_meta  # ... _meta.terminal_output (Zed's terminal)
        self.reported = set()  # call ids announced with tool_call
        self.running = []  # in-progress call ids, innermost last (owners of terminals)
        self.terminals = {}  # terminal id -> TerminalView
        self.flush_wanted = []  # terminal ids with output held back by the interval
        self.announced = set()  # call ids announced with a terminal (terminal_meta)
        self.streams = {}  # terminal id -> terminal_meta.Stream of the call showing it

    def updates(self, event):
        handler = _EVENTS.get(type(event))
        return handler(self, event) if handler is not None else []

    def flush(self, terminal_id):
        """Output held back for ``terminal_id``, if any is still unsent."""
        view = self.terminals.get(terminal_id)
        if view is None or not view.dirty or view.call_id is None:
            return []
        return [self._terminal_update(view)]

    def turn_ended(self):
        self.reported.clear()
        self.running.clear()
        self.terminals.clear()
        self.flush_wanted.clear()
        self.announced.clear()
        for terminal_id in [t for t, s in self.streams.items() if s.exited]:
            del self.streams[terminal_id]  # a background process's stays until it exits

    # ------------------------------------------------------------ events
    def _tool(self, e):
        first = e.call_id not in self.reported
        if e.status == "in_progress":
            self.running.append(e.call_id)
        elif e.status in FINISHED and e.call_id in self.running:
            self.running.remove(e.call_id)
        if first:
            self.reported.add(e.call_id)
            update = {"sessionUpdate": "tool_call", "toolCallId": e.call_id,
                      "title": e.title or e.name or "tool"}
        else:
            update = {"sessionUpdate": "tool_call_update", "toolCallId": e.call_id}
            if e.title is not None:
                update["title"] = e.title
        tool_fields(update, e.fields(), self.terminals, self._shown)
        if first and self.terminal_meta and e.name in terminal_meta.TOOLS:
            self.announced.add(e.call_id)  # Zed makes its terminal from the first report
            update["_meta"] = {**update.get("_meta", {}), **terminal_meta.info(e.call_id, self.cwd)}
            update.setdefault("content", terminal_meta.content(e.call_id))
        if e.status in FINISHED:
            for terminal_id in [t for t, v in self.terminals.items() if v.call_id == e.call_id]:
                del self.terminals[terminal_id]
            for terminal_id, stream in list(self.streams.items()):
                if stream.call_id == e.call_id:
                    stream.call_done = True  # a background process's streams on
                    if stream.exited:
                        del self.streams[terminal_id]
        return [update]

    def _shown(self, terminal_id):
        """The call whose editor terminal shows ``terminal_id`` (None: shown as text)."""
        stream = self.streams.get(terminal_id)
        return stream.call_id if stream is not None else None

    def _terminal_update(self, view):
        view.dirty = False
        view.sent_at = time.monotonic()
        return {"sessionUpdate": "tool_call_update", "toolCallId": view.call_id,
                "content": view.content()}

    def _terminal_started(self, e):
        call_id = e.call_id or (self.running[-1] if self.running else None)
        if call_id in self.announced and all(s.call_id != call_id for s in self.streams.values()):
            self.streams[e.terminal_id] = terminal_meta.Stream(call_id)
            return []
        view = self.terminals[e.terminal_id] = TerminalView(call_id, e.command)
        return [self._terminal_update(view)] if view.call_id else []

    def _terminal_output(self, e):
        stream = self.streams.get(e.terminal_id)
        if stream is not None:
            return stream.output(e.data)
        view = self.terminals.get(e.terminal_id)
        if view is None:
            return []
        view.add(e.data)
        if view.call_id is None:
            return []
        if time.monotonic() - view.sent_at >= FLUSH_INTERVAL:
            return [self._terminal_update(view)]
        if e.terminal_id not in self.flush_wanted:
            self.flush_wanted.append(e.terminal_id)
        return []

    def _terminal_exited(self, e):
        stream = self.streams.get(e.terminal_id)
        if stream is not None:
            if stream.call_done:  # a background process: its call ended long ago
                del self.streams[e.terminal_id]
            return stream.exit(e.exit_code, e.signal)
        view = self.terminals.get(e.terminal_id)
        if view is None:
            return []
        view.finish(e.exit_code, e.signal)
        return [self._terminal_update(view)] if view.call_id else []


def _usage(view, e):
    update = {"sessionUpdate": "usage_update", "used": e.used, "size": e.size}
    if e.cost:
        update["cost"] = e.cost
    return [update]


def _info(view, e):
    update = {"sessionUpdate": "session_info_update"}
    if e.title is not None:
        update["title"] = e.title
    if e.updated_at is not None:
        update["updatedAt"] = e.updated_at
    return [update]


def _compaction(view, e):
    update = compaction_update(e.compaction_id, e.status, e.summary, e.error, e.text,
                               view.compaction)
    return [update] if update is not None else []


_EVENTS = {
    ev.Notice: lambda view, e: [{"sessionUpdate": "agent_message_chunk",
                                 "messageId": e.message_id, "content": _text(e.text)}],
    ev.CompactionReported: _compaction,
    ev.TextChunk: lambda view, e: [{"sessionUpdate": "agent_message_chunk",
                                    "messageId": e.message_id, "content": _text(e.text)}],
    ev.ThoughtChunk: lambda view, e: [{"sessionUpdate": "agent_thought_chunk",
                                       "messageId": e.message_id, "content": _text(e.text)}],
    ev.ToolCallReported: SessionView._tool,
    ev.TerminalStarted: SessionView._terminal_started,
    ev.TerminalOutput: SessionView._terminal_output,
    ev.TerminalExited: SessionView._terminal_exited,
    ev.UsageReported: _usage,
    ev.SessionInfoChanged: _info,
}


# ---------------------------------------------------------------- session/load
def replay_updates(records, compaction=False, terminal_meta=False, terminal_records=None):
    """The journal as v1 updates: message chunks, and each tool call as ``tool_call``
    (what it was) then ``tool_call_update`` (how it ended). ``terminal_meta``: a command's
    output goes to the editor's terminal (``acp/v1/terminal_meta.py``). ``records`` is
    read once when ``terminal_records`` (its terminal records) is given, else twice."""
    if terminal_records is None:
        records = terminal_records = list(records)
    terminals, journaled = replay_terminals(terminal_records)
    for kind, payload in records:
        yield from replay_record(kind, payload, compaction, terminals,
                                 journaled if terminal_meta else None)


def replay_terminals(terminal_records):
    """``(views, records)`` of the journal's terminals by id, for :func:`replay_record`."""
    terminals, journaled = {}, {}
    for kind, payload in terminal_records:
        if kind == "terminal":
            journaled[payload["terminal_id"]] = payload
            view = terminals[payload["terminal_id"]] = TerminalView(None, payload["command"])
            view.add(base64.b64decode(payload.get("output") or ""))
            if payload.get("exit"):
                view.finish(**payload["exit"])
    return terminals, journaled


def replay_record(kind, payload, compaction=False, terminals=None, journaled=None):
    """One journal record's v1 updates; ``journaled`` (terminal records by id) only with
    ``terminal_meta``."""
    if kind == "user_message":
        for block in payload["content"]:
            yield {"sessionUpdate": "user_message_chunk", "messageId": payload["message_id"],
                   "content": block}
    elif kind in ("agent_message", "agent_thought") and payload.get("text"):
        yield {"sessionUpdate": f"{kind}_chunk", "messageId": payload["message_id"],
               "content": _text(payload["text"])}
    elif kind == "tool_call":
        yield from _replayed_call(payload, terminals or {}, journaled)
    elif kind == "plan":
        yield {"sessionUpdate": "plan", "entries": [dict(e) for e in payload["entries"]]}
    elif kind == "compaction":
        update = replayed_compaction(payload, compaction)
        if update is not None:
            yield update


def _replayed_call(payload, terminals, journaled=None):
    call_id = payload["call_id"]
    first = {"sessionUpdate": "tool_call", "toolCallId": call_id,
             "title": payload.get("title") or payload.get("name") or "tool", "status": "pending"}
    tool_fields(first, {k: payload.get(k) for k in ("kind", "raw_input", "locations", "name",
                                                    "parent")})
    shown = None
    own = [item["terminal_id"] for item in payload.get("content") or ()
           if item.get("type") == "terminal" and item["terminal_id"] in (journaled or {})]
    if own:  # the first terminal in the editor's own terminal, the others as text
        terminal = journaled[own[0]]
        first["_meta"] = {**first.get("_meta", {}), **terminal_meta.info(call_id, terminal.get("cwd"))}
        first["content"] = terminal_meta.content(call_id)
        shown = {own[0]: call_id}.get
    yield first
    if own:
        yield from terminal_meta.replayed(call_id, terminal)
    final = {"sessionUpdate": "tool_call_update", "toolCallId": call_id}
    yield tool_fields(final, {k: payload.get(k) for k in ("status", "content", "raw_output",
                                                          "parent")}, terminals, shown)
