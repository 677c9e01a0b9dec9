"""A sub-agent's run: a child session and its turn, inside the parent's turn.

The child is a :class:`ChildSession` over the parent's live session: its own history
(a context note, then the kind's instructions with the task), the parent's id (so the
provider's prompt cache key is the parent's), lifecycle (a cancel of the parent's turn
stops it, its questions go through the parent's approval gate), grants, mode, shell
session and checkpoint (``/undo`` of the turn takes back what the child wrote). Its
events go to the parent's session: each tool call tagged with the agent call's id
(``ToolCallReported.parent``, ``_meta.term2.parentToolCallId`` on the wire), so they are
shown, journaled and replayed as the parent's calls; its messages and thoughts stay its
own (its answer is the agent call's result), and the agent call's content shows its
steps as they go.

:class:`ChildTurn` is the parent's :class:`~term2acp.turns.turn.Turn` loop with the
child's session: its requests carry the parent's system prompt and tool list (a
``general`` child: the same bytes), its tokens and price count in the parent turn's
usage and the session's cost, and it runs in the agent call's worker greenlet, so a
cancel of the parent's round kills it, its model request and its commands with it.
"""

import copy

from gevent.lock import BoundedSemaphore

from term2acp.core import events as ev
from term2acp.tools.base import ToolError, ToolResult
from term2acp.turns import notes
from term2acp.turns.prompt import system_prompt
from term2acp.turns.calls import ToolCall
from term2acp.turns.rounds import run_round
from term2acp.turns.turn import Turn

FORWARDED = (ev.TerminalStarted, ev.TerminalOutput, ev.TerminalExited, ev.Notice)
MARKS = {"completed": "✓", "failed": "✗", "cancelled": "✗"}
PROGRESS_LINES = 40  # the last steps the agent call's content shows


class _ChildStore:
    """The parent's store, except that the child's history is not the session's."""

    def __init__(self, store):
        self._store = store

    def append_history(self, session_id, message):
        return None

    def __getattr__(self, name):
        return getattr(self._store, name)


class _ChildRecording:
    """The parent session's recording, for a child's model replies and questions."""

    def __init__(self, recording, call_id):
        self._recording, self._call_id = recording, call_id

    def reply(self, turn, payload):
        self._recording.reply(turn, dict(payload, agent=self._call_id))

    def permission(self, turn, payload):
        self._recording.permission(turn, dict(payload, agent=self._call_id))


class ChildSession:
    """A child's view of the parent's live session (module docstring); what it does not
    set itself is the parent's."""

    def __init__(self, parent, call_id, root=None, model=None, effort=None, agent_key=None):
        self._parent = parent
        self.call_id = call_id  # the agent call this child answers
        self.history = []
        self.history_rows = 0
        self.window_learned = None
        self.context_size = self.request_view = self.notes_told = None  # of its history
        self.instructions = None
        self.store = _ChildStore(parent.store)
        self.root = root or parent.root
        self.model = model or parent.model
        self.effort = effort or parent.effort
        self.steps = {}  # child call id -> [mark, title]
        # its model replies go to the parent's recording, named by the agent call, so an
        # exported session replays each child's replies to that child (providers/scripted)
        self.recording = None if parent.recording is None else _ChildRecording(
            parent.recording, agent_key or call_id)
        if root is not None:  # an overlay: the copy alone, grants over it, nothing for /undo
            self.access = copy.copy(parent.access)
            self.access.root, self.access.extra_roots = root, ()
            self.extra_roots = ()
            self.checkpoint = None

    def __getattr__(self, name):
        return getattr(self._parent, name)

    @property
    def interaction_seq(self):  # the ids of questions are the parent session's
        return self._parent.interaction_seq

    @interaction_seq.setter
    def interaction_seq(self, value):
        self._parent.interaction_seq = value

    @property
    def mode(self):  # a child never has a mode of its own (nor more than the session's)
        return self._parent.mode

    def append_history(self, message):
        self.history.append(message)

    def store_history(self, message):
        return None

    def emit(self, event):
        kind = type(event)
        if kind is ev.ToolCallReported:
            if event.parent is None:
                event.parent = self.call_id
            self._parent.emit(event)
            self._step(event)
        elif kind in FORWARDED:
            self._parent.emit(event)
        # its message and thought chunks, plans, compactions: the child's own

    def _step(self, event):
        """Show the child's steps as the agent call's content."""
        step = self.steps.get(event.call_id)
        if step is None:
            step = self.steps[event.call_id] = ["…", event.title or event.name or "tool"]
        elif event.status not in MARKS:
            return
        else:
            step[0] = MARKS[event.status]
        self._parent.emit(ev.ToolCallReported(self.call_id, content=self.progress()))

    def progress(self):
        lines = [f"{mark} {title}" for mark, title in list(self.steps.values())[-PROGRESS_LINES:]]
        return [{"type": "text", "text": "\n".join(lines)}] if lines else []


class ChildTurn(Turn):
    """The turn loop of one child (module docstring)."""

    def __init__(self, parent, session, tools, system, kind, agent_key=None):
        super().__init__(session, parent.provider, tools, parent.settings, system)
        self.parent = parent
        self.parent_call = session.call_id
        self.agent_key = agent_key or session.call_id
        self.kind = kind
        self.asking = parent.asking  # one question at a time, the parent's or a child's
        self.greenlet = parent.greenlet  # an abort (a stale allow) ends the parent's turn

    def set_mode(self, mode):
        """Plan mode's finish_plan switches the session's mode (the parent turn's way)."""
        self.parent.set_mode(mode)

    def run(self, prompt):
        session = self.session
        notes.add_pending(session)
        session.append_history({"role": "user",
                                "content": f"{self.kind.instructions}\n\n# Task\n{prompt}"})
        ending = "cancelled"
        try:
            for _ in range(self.settings.max_turn_requests):
                stop, calls = self._model_round()
                if stop == "pause" and not calls:
                    continue
                if not calls:
                    if stop == "refusal":
                        raise ToolError("The sub-agent's model refused the task.")
                    ending = "completed"
                    return self.answer_text(stop)
                run_round(self, [ToolCall(self, record) for record in calls],
                          self.settings.max_parallel_tools)
                if self.ended:
                    ending = "completed"
                    return self.answer_text(stop)
            raise ToolError("The sub-agent used all its model requests "
                            f"({self.settings.max_turn_requests}) without answering.")
        except Exception:
            ending = "failed"
            raise
        finally:
            self.close_open_calls(ending if ending != "completed" else "cancelled")

    def answer_text(self, stop):
        for message in reversed(self.session.history):
            if message.get("role") == "assistant" and message.get("content"):
                text = message["content"]
                break
        else:
            text = "(The sub-agent ended without an answer.)"
        if stop == "max_tokens":
            text += "\n[The answer was cut at the model's output limit.]"
        return text

    def _usage(self, usage):
        """The child's request counts in the parent turn's usage and cost; the context
        figures the parent reported stay the parent's."""
        amount = self._price(usage)
        self.parent.add_usage(usage, amount)
        if amount is not None:
            self.cost += float(amount)
        self.parent.report_usage()
        return amount


def slots(turn):
    """The parent turn's semaphore of children running at once (``[agents] max_parallel``)."""
    found = getattr(turn, "agent_slots", None)
    if found is None:
        found = turn.agent_slots = BoundedSemaphore(max(1, turn.settings.agents.max_parallel))
    return found


def run_child(turn, call_id, kind, prompt, root=None):
    """Run a child of ``kind`` on ``prompt`` for the agent call ``call_id`` of ``turn``;
    returns ``(answer, child session, cost)``. Raises ToolError, ProviderError, or a
    GreenletExit when the parent's turn ends."""
    record = turn.calls.get(call_id)  # the model's id of the call: the same in a replay
    key = record.model_id if record is not None and record.model_id else call_id
    session = ChildSession(turn.session, call_id, root=root,
                           model=kind.model or getattr(turn, "model", None), effort=kind.effort,
                           agent_key=key)
    tools = kind.offered(turn.tools)
    system = turn.system if tools is turn.tools else system_prompt(
        tools, getattr(turn.provider, "brief_prompt", False), session.root,
        session.sandbox_note or "")
    child = ChildTurn(turn, session, tools, system, kind, agent_key=key)
    with slots(turn):
        answer = child.run(prompt)
    return answer, session, child.cost


def result(answer, session, cost, extra=()):
    """The agent call's ToolResult: its steps, then the answer (and ``extra`` items)."""
    content = session.progress() + [{"type": "text", "text": answer}, *extra]
    return ToolResult(answer, content=content, cost=cost)
