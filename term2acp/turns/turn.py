"""One prompt turn: model -> tools -> model, until the model answers or a budget ends it.

The turn runs in the session's turn greenlet and emits plain events through
``session.emit``. Cancellation kills that greenlet with ``TurnCancelled``
(``core/cancel.py``, a ``GreenletExit``), wherever it is: streaming, inside a tool, or
waiting for approval. ``finally`` blocks close every open tool call, so nothing is left
``in_progress``.

Each tool call has one ``CallRecord`` (``turns/rounds.py``), owned by the turn: its ids,
name, input, title, kind, locations, status and content; its steps are a
``turns/calls.py`` ``ToolCall``'s, scheduled by the round (``turns/rounds.py``). Every ``ToolCallReported`` is made from it, an approval's
interaction describes it, and :meth:`Turn.close_open_calls` settles what it says is
unfinished (a terminal status for the editor, a result for the model). A tool's approval
check may return a plan (``tools/base.py``); the turn reports the plan's locations, asks
for its request and hands that same plan to ``run``.
"""

import logging

import gevent
from gevent.lock import Semaphore

from term2acp.core import events as ev
from term2acp.core.cancel import TurnAborted
from term2acp.core.ids import new_id
from term2acp.core.nesting import MAX_ARGUMENT_CHARS
from term2acp.core.pacing import breathe, overdue
from term2acp.core.text import scrub_text
from term2acp.providers import base as pb
from term2acp.providers import prices
from term2acp.turns import commands, filecommands, hooks, modes, notes, steering, websearch
from term2acp.turns.calls import ToolCall
from term2acp.turns.records import CallRecord, report
from term2acp.turns.checkpoints import TurnCheckpoint, may_change_files
from term2acp.turns.compaction import ContextGuard
from term2acp.turns.request_view import request_messages
from term2acp.turns.rounds import run_round
from term2acp.turns.session import TurnSession

log = logging.getLogger(__name__)

MODEL_RESULT_CAP = 100_000


class Turn:
    """One prompt's loop; each tool call is a ``turns/calls.py`` ``ToolCall``."""

    parent_call = None  # a sub-agent's turn: the agent call it answers (turns/agents/)
    agent_key = None  # ... and the model's id of that call (what its requests are named by)

    def __init__(self, session: TurnSession, provider, tools, settings, system):
        self.session = session  # what it may touch of it: turns/session.py
        self.provider = provider
        self.tools = tools
        self.settings = settings
        self.system = system
        self.calls = {}  # id -> CallRecord of every call still open or unanswered
        self.greenlet = None  # the turn greenlet, where an abort must land
        self.asking = Semaphore()  # one question at a time, whichever call asks
        self.cost = 0.0
        self.ended = False  # a call's result ends the turn after its round (ToolResult.end_turn)
        self.tokens = None  # summed over the turn's model rounds, once a provider reports
        self.requests = 0  # model requests this turn made
        self.reported = None  # (used, size) of the last usage report: the context figures
        self.context = ContextGuard(session, provider, settings)  # size, compaction
        self.searches = websearch.Searches(self)  # the provider's own web searches
        self.model = None  # a file command's model: this prompt's requests use it

    # ------------------------------------------------------------ the loop
    def run(self, user_text):
        self.greenlet = gevent.getcurrent()
        if overdue():  # many prompts starting at once (core/pacing.py)
            breathe()
        hooks.of(self)  # the workspace's hooks file is looked at (and asked about) first
        known = filecommands.listed(self.session, self.settings)
        prompt = commands.run(self, user_text, known)  # a slash command: answered, or a prompt
        if prompt == "":
            return "end_turn"
        if prompt is not None:
            user_text = prompt
        blocked, context = hooks.at_prompt(self, user_text)
        if blocked is not None:  # never sent; the user sees why
            commands.say(self, f"A hook blocked this prompt: {blocked}", in_history=False)
            return "end_turn"
        self._begin_checkpoint(user_text)
        message = {"role": "user", "content": user_text}
        if self.session.prompt_message_id:  # a fork point (session/fork)
            message["message_id"] = self.session.prompt_message_id
        if getattr(user_text, "images", None):  # turns/content.py: images for the model
            message["images"] = list(user_text.images)
        notes.add_pending(self.session)  # what changed since the last prompt, just before it
        for item in context:
            self.session.append_history(item)
        self.session.append_history(message)
        limit = self.settings.max_cost  # USD a run may spend (exec)
        went_on = False
        for _ in range(self.settings.max_turn_requests):
            if limit is not None and self.requests and self.cost > limit:
                return "max_cost"
            steering.take(self.session)  # prompts sent meanwhile join the turn here
            stop, calls = self._model_round()
            if stop == "pause" and not calls:  # the server paused its own tools' long run:
                continue  # the answer so far goes back as it is, and the model goes on
            if not calls and steering.pending(self.session):
                continue  # the model answers what was sent while it was answering
            if not calls:
                if stop in ("max_tokens", "refusal"):
                    return stop
                reason = hooks.at_stop(self, went_on)
                if reason is None or went_on:
                    return "end_turn"
                went_on = True  # a Stop hook blocked: the turn goes on once, with its reason
                self.session.append_history({"role": "user",
                                             "content": f"A Stop hook says: {reason}"})
                continue
            run_round(self, [ToolCall(self, record) for record in calls],
                      self.settings.max_parallel_tools)
            if self.ended:  # a tool ended the turn (plan mode's "keep planning")
                return "end_turn"
        return "max_turn_requests"

    def _begin_checkpoint(self, text):
        """This prompt reaches the model: it is a turn /undo can take back."""
        session = self.session
        message_id = session.prompt_message_id
        if message_id is not None and session.store is not None:
            session.checkpoint = TurnCheckpoint.begin(session, self.settings, message_id,
                                                      str(text))

    def watch(self, tool):
        """Around a tool that may change files without telling the checkpoint (a command):
        returns what to call when it is done, or None."""
        checkpoint = self.session.checkpoint
        if checkpoint is None or not may_change_files(tool):
            return None
        before = checkpoint.before_command(tool.name)
        return lambda: checkpoint.after_command(tool.name, before)

    # ------------------------------------------------------------ its calls
    def run_tool(self, record):
        """Report, approve and run the call ``record`` (a nested one, outside a round)."""
        return ToolCall(self, record).run()

    def answer(self, record, result):
        """Put a model call's settled result in the history (the round keeps model order).

        If the turn dies before, the record stays unanswered and :meth:`close_open_calls`
        gives the model its result (the real one when it had settled, else a note)."""
        record.answered = True
        self.calls.pop(record.id, None)
        self.ended = self.ended or getattr(result, "end_turn", False)
        self.session.append_history(
            {"role": "tool", "tool_call_id": record.model_id, "name": record.name,
             "content": scrub_text(self.context.cap_result(result.text, MODEL_RESULT_CAP)),
             "is_error": result.is_error,
             **({"images": result.images} if getattr(result, "images", None) else {}),
             **({"cost": round(result.cost, 8)} if getattr(result, "cost", None) else {})})

    def close_open_calls(self, status):
        """Give every unfinished call a terminal status and the model a matching result."""
        records = list(self.calls.values())
        self.calls.clear()
        for record in records:
            if record.open:
                report(self, record, status)
        for record in records:
            if record.unanswered:
                if record.result is not None and record.status in ("completed", "failed"):
                    self.answer(record, record.result)  # settled before the round gave it back
                    continue
                record.answered = True
                self.session.append_history({"role": "tool", "tool_call_id": record.model_id,
                                             "name": record.name, "is_error": True,
                                             "content": f"Not run: the turn ended ({status})."})

    def abort(self, reason):
        """End the turn as cancelled. Raised where the abort was found; when that is not the
        turn greenlet (a tool's helper, e.g. run_code answering a nested call), the turn
        greenlet gets it too, so no tool can keep the turn going past it."""
        aborted = TurnAborted(reason)
        turn = self.greenlet
        if isinstance(turn, gevent.Greenlet) and turn is not gevent.getcurrent():
            turn.kill(aborted, block=False)
        raise aborted

    def set_mode(self, mode):
        """Switch the session's mode as ``session/set_config_option`` does (reported, stored)."""
        session = self.session
        options = session.config_options
        if options is not None:
            options.set(session, "mode", mode)
        else:
            session.mode = mode

    def elicits(self, mode):
        """The editor takes questions of ``mode`` (``ctx.elicits``)."""
        gate = self.session.lifecycle.gate
        return gate is not None and gate.elicits(mode)

    def _model_round(self):
        if overdue():  # many turns starting at once take turns with the hub's I/O
            breathe()
        session = self.session
        mode = session.mode
        system = self.system
        if getattr(self.provider, "brief_prompt", False):
            system += notes.in_system(session)
        request = pb.ModelRequest(model=self.model or session.model, system=system, messages=[],
                                  tools=[tool.spec() for tool in
                                         modes.offered_tools(mode, self.tools).values()],
                                  effort=session.effort, cache_key=session.id,
                                  web_search=websearch.option(self.settings, self.provider),
                                  agent=self.agent_key)
        # A mode switch during the turn (AGENTS.md is looked at once a prompt, before it),
        # or the notes a compaction folded away: a note message where it happened.
        notes.add_pending(session, notes.WITHIN_TURN)
        history = session.history
        request.messages = self.context.messages(request.system, request.tools)
        if session.history is not history and notes.add_pending(session) is not None:
            request.messages = request_messages(session)
        message_id, thought_id = new_id("msg"), new_id("thought")
        text, thought, calls, stop, replay, spent = [], [], [], None, None, None
        usage, error = None, None
        self.requests += 1
        # What was written so far (the user message, a tool's result) is committed before
        # the model is asked: no transaction stays open while the model streams, and a
        # failure of that batch fails the turn before anything of the answer is emitted.
        session.commit()
        stream = self.context.stream(request)
        try:
            for item in stream:
                kind = type(item)
                if kind is pb.TextDelta:
                    if item.text:
                        text.append(item.text)
                        session.emit(ev.TextChunk(message_id, item.text))
                elif kind is pb.ThoughtDelta:
                    if item.text:
                        thought.append(item.text)
                        session.emit(ev.ThoughtChunk(thought_id, item.text))
                elif kind is pb.ToolCall:
                    calls.append(item)
                elif kind is pb.Usage:
                    usage, spent = item, self._usage(item)
                elif kind is pb.Replay:
                    replay = {"kind": item.kind, "items": item.items}
                elif kind is pb.WebSearch:
                    self.searches.report(item)
                elif kind is pb.Stop:
                    stop = item.reason
        except Exception as exc:
            error = exc
            raise
        finally:
            stream.close()  # the request and its waiting clock end now, not when collected
            _record_reply(session, text, thought, calls, usage, spent, stop, error)
            message = {"role": "assistant", "content": scrub_text("".join(text)),
                       "thought": scrub_text("".join(thought)) or None,
                       "tool_calls": [{"id": c.call_id, "name": c.name,
                                       "arguments": _bounded(c.arguments)} for c in calls]}
            if replay is not None:
                message["replay"] = replay
            if spent:  # USD; a resumed session's cost goes on from the stored sum
                message["cost"] = round(spent, 8)
            if text:  # the id the editor saw: a fork point (session/fork)
                message["message_id"] = message_id
            if text or thought or calls or replay is not None:  # (an answer that only searched)
                session.append_history(message)
            records = []
            for call in calls:
                record = CallRecord(new_id("tc"), call.name, call.arguments, call.call_id)
                self.calls[record.id] = record
                records.append(record)
        return stop, records

    def _usage(self, usage):
        """Count one request's usage, report it; returns its cost in USD, or None."""
        amount = self._price(usage)
        self.add_usage(usage, amount)
        size = self.context.window()  # learned, configured, catalog or provider (context.py)
        if size:
            self.reported = (usage.input_tokens + usage.output_tokens, size)
            self.report_usage()
        return amount

    def _price(self, usage):
        amount = usage.cost_usd
        if amount is None:  # priced from the table (providers/prices.py) when it knows
            cache = getattr(self.provider, "cache", None)
            amount = prices.cost(usage.model or self.session.model, usage,
                                 self.settings.prices,
                                 long_cache=isinstance(cache, dict) and cache.get("ttl") == "1h")
        return amount

    def add_usage(self, usage, amount):
        """Add one request's tokens and price (this turn's or a sub-agent's) to the turn's."""
        counts = (usage.input_tokens, usage.output_tokens, usage.thought_tokens,
                  usage.cached_tokens, usage.cache_write_tokens)
        self.tokens = [a + b for a, b in zip(self.tokens or (0,) * 5, counts)]
        if amount is not None:
            self.cost += float(amount)

    def report_usage(self):
        """The context figures of the turn's last request, with the session's cost so far."""
        if self.reported is None:
            return
        total = self.session.cost + self.cost
        cost = {"amount": round(total, 6), "currency": "USD"} if total else None
        self.session.emit(ev.UsageReported(used=self.reported[0], size=self.reported[1],
                                           cost=cost))


def _record_reply(session, text, thought, calls, usage, cost, stop, error):
    """The reply as it arrived, in the scripted provider's steps (sessions/recording.py)."""
    recording = session.recording
    if recording is None:
        return
    steps = [{"thought": scrub_text("".join(thought))}] if thought else []
    if text:
        steps.append({"text": scrub_text("".join(text))})
    for call in calls:
        steps.append({"tool_call": {"name": call.name, "arguments": _bounded(call.arguments),
                                    "id": call.call_id}})
    counts = None
    if usage is not None:
        counts = {"input": usage.input_tokens, "output": usage.output_tokens,
                  "cached": usage.cached_tokens, "thought": usage.thought_tokens}
        steps.append({"usage": dict(counts, **({"cost": round(cost, 8)} if cost else {}))})
    if error is not None:
        steps.append({"error": scrub_text(str(error))[:500]})
    elif stop is not None:
        steps.append({"stop": stop})
    recording.reply(session.prompt_message_id, {
        "model": session.model, "provider": session.provider_id,
        "steps": steps, "usage": counts, "cost": cost, "stop": stop,
        "cancelled": error is None and stop is None})


def _bounded(arguments):
    """A call's arguments as the history keeps them: over MAX_ARGUMENT_CHARS, ``{}`` (the
    call fails saying why; the text is neither stored nor sent back to the model)."""
    if isinstance(arguments, str) and len(arguments) > MAX_ARGUMENT_CHARS:
        return "{}"
    return arguments
