"""Consolidates runtime events into replay records (whole messages, final tool states).

Chunks are appended in memory and written back as whole records right before the
store's next trip to its thread (at the latest the commit the protocol writer makes
before it puts the lines that reported them on the wire: ``Store.commit_quietly``), so a
5,000-chunk answer costs a handful of writes and no thread round trip per chunk, and
a ``kill -9`` loses nothing reported. A Recorder registers with the store
(``Store.defer``) when it first has something to write since its last flush.
"""

import base64
import uuid

from term2acp.core import events as ev

TERMINAL_TAIL = 64 * 1024


class Recorder:
    def __init__(self, store, session_id):
        self._store = store
        self._sid = session_id
        self._messages = {}  # message id -> [kind, list of text parts]
        self._calls = {}  # call id -> merged dict
        self._terminals = {}  # terminal id -> dict with bytearray output tail
        self._dirty = {}  # insertion-ordered: first report decides the record's position

    def _mark(self, key):
        if not self._dirty:
            self._store.defer(self)  # flushed before the store's next trip
        self._dirty[key] = None

    def record(self, event):
        kind = type(event)
        if kind is ev.TextChunk or kind is ev.ThoughtChunk:
            entry = self._messages.get(event.message_id)
            if entry is None:
                tag = "agent_message" if kind is ev.TextChunk else "agent_thought"
                entry = self._messages[event.message_id] = [tag, []]
            entry[1].append(event.text)
            if not self._dirty:  # self._mark, inlined: this is the per-chunk path
                self._store.defer(self)
            self._dirty[("m", event.message_id)] = None
        elif kind is ev.UserMessage:
            self.flush()  # keep the journal in reporting order
            self._store.journal_put(self._sid, "user_message", event.message_id,
                                    {"message_id": event.message_id, "content": event.content})
        elif kind is ev.PlanUpdated:
            self.flush()  # keep the journal in reporting order
            self._store.journal_put(self._sid, "plan", f"plan:{uuid.uuid4().hex}",
                                    {"plan_id": event.plan_id, "entries": event.entries})
        elif kind is ev.Notice:  # replayed as the agent message the user saw
            self._messages[event.message_id] = ["agent_message", [event.text]]
            self._mark(("m", event.message_id))
        elif kind is ev.CompactionReported:
            self.flush()  # keep the journal in reporting order
            self._store.journal_put(self._sid, "compaction", event.compaction_id, {
                "compaction_id": event.compaction_id, "status": event.status,
                "summary": event.summary, "error": event.error, "text": event.text})
        elif kind is ev.ToolCallReported:
            merged = self._calls.setdefault(event.call_id, {"call_id": event.call_id})
            for field in ("title", "kind", "status", "raw_input", "locations", "content",
                          "raw_output", "name", "parent"):
                value = getattr(event, field)
                if value is not None:
                    merged[field] = value
            self._mark(("c", event.call_id))
        elif kind is ev.TerminalStarted:
            self._terminals[event.terminal_id] = {"terminal_id": event.terminal_id,
                                                  "command": event.command, "cwd": event.cwd,
                                                  "tail": bytearray()}
            self._mark(("t", event.terminal_id))
        elif kind is ev.TerminalOutput:
            term = self._terminals.get(event.terminal_id)
            if term is not None:
                tail = term["tail"]
                tail += event.data
                if len(tail) > TERMINAL_TAIL:
                    del tail[:len(tail) - TERMINAL_TAIL]
                self._mark(("t", event.terminal_id))
        elif kind is ev.TerminalExited:
            term = self._terminals.get(event.terminal_id)
            if term is not None:
                term["exit"] = {"exit_code": event.exit_code, "signal": event.signal}
                self._mark(("t", event.terminal_id))

    def flush(self):
        """Write every record changed since the last flush (queued in the store: they go
        to its thread, in one transaction, with its next trip)."""
        dirty, self._dirty = self._dirty, {}
        for tag, key in dirty:
            if tag == "m":
                kind, parts = self._messages[key]
                if len(parts) > 1:
                    parts[:] = ["".join(parts)]
                self._store.journal_put(self._sid, kind, key, {"message_id": key, "text": parts[0]})
            elif tag == "c":
                self._store.journal_put(self._sid, "tool_call", key, self._calls[key])
            else:
                term = self._terminals[key]
                payload = {k: v for k, v in term.items() if k != "tail"}
                payload["output"] = base64.b64encode(bytes(term["tail"])).decode()
                self._store.journal_put(self._sid, "terminal", "terminal:" + key, payload)

    def forget_finished(self):
        """Drop in-memory state of a settled turn (records are already in the store); the
        terminals of background processes still running stay, to record their output
        and exit."""
        self.flush()
        self._messages.clear()
        self._calls.clear()
        for key in [k for k, term in self._terminals.items() if "exit" in term]:
            del self._terminals[key]
