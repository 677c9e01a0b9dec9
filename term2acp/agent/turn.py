"""One prompt turn: model -> tools -> model, until the model answers or a budget ends it.

The turn runs in the session's turn greenlet and emits plain events through
``session.emit``. Cancellation kills that greenlet with :class:`TurnCancelled` (a
``GreenletExit``), wherever it is: streaming, inside a tool, or waiting for approval.
``finally`` blocks close every open tool call, so nothing is left ``in_progress``.
"""

import json
import logging
import os

import gevent

from term2acp.agent import commands, modes
from term2acp.agent.context import ContextGuard
from term2acp.agent.prompt import scrub_text
from term2acp.core import approvals
from term2acp.core import events as ev
from term2acp.core.ids import new_id  # noqa: F401 - the turn's ids (re-exported)
from term2acp.core.nesting import MAX_DEPTH, too_deep
from term2acp.providers import base as pb
from term2acp.tools.base import ToolContext, ToolError, ToolResult

log = logging.getLogger(__name__)

RESULT_DISPLAY_CAP = 16_000
MODEL_RESULT_CAP = 100_000


class TurnCancelled(gevent.GreenletExit):
    """Kills a turn greenlet; ``except Exception`` in a tool cannot swallow it."""


class TurnAborted(Exception):
    """A fail-closed path that ends the turn as cancelled (stale approval, closed session)."""


class Turn:
    def __init__(self, session, provider, tools, settings, system):
        self.session = session
        self.provider = provider
        self.tools = tools
        self.settings = settings
        self.system = system
        self.open_calls = {}  # reported calls without a terminal status yet
        self._pending_results = []  # model tool calls whose results are not in the history
        self.cost = 0.0
        self.tokens = None  # summed over the turn's model rounds, once a provider reports
        self.context = ContextGuard(session, provider, settings)  # size, compaction

    # ------------------------------------------------------------ the loop
    def run(self, user_text):
        prompt = commands.run(self, user_text)  # a slash command: answered, or a prompt
        if prompt == "":
            return "end_turn"
        if prompt is not None:
            user_text = prompt
        message = {"role": "user", "content": user_text}
        if getattr(user_text, "images", None):  # agent/content.py: images for the model
            message["images"] = list(user_text.images)
        self.session.append_history(message)
        for _ in range(self.settings.max_turn_requests):
            stop, calls = self._model_round()
            if not calls:
                return stop if stop in ("max_tokens", "refusal") else "end_turn"
            for call in calls:
                self._execute(call)
        return "max_turn_requests"

    def _model_round(self):
        session = self.session
        request = pb.ModelRequest(model=session.model,
                                  system=self.system + modes.system_note(getattr(session, "mode", None)),
                                  messages=[],
                                  tools=[tool.spec() for tool in self.tools.values()],
                                  effort=session.effort)
        request.messages = self.context.messages(request.system)
        message_id, thought_id = new_id("msg"), new_id("thought")
        text, thought, calls, stop = [], [], [], None
        session.commit()  # no store write transaction stays open while the model streams
        try:
            for item in self.context.stream(request):
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
                    self._usage(item)
                elif kind is pb.Stop:
                    stop = item.reason
        finally:
            message = {"role": "assistant", "content": scrub_text("".join(text)),
                       "thought": scrub_text("".join(thought)) or None,
                       "tool_calls": [{"id": c.call_id, "name": c.name, "arguments": c.arguments}
                                      for c in calls]}
            if text or thought or calls:
                session.append_history(message)
            self._pending_results = list(calls)
        return stop, calls

    def _usage(self, usage):
        counts = (usage.input_tokens, usage.output_tokens, usage.thought_tokens, usage.cached_tokens)
        self.tokens = [a + b for a, b in zip(self.tokens or (0, 0, 0, 0), counts)]
        if usage.cost_usd is not None:
            self.cost += float(usage.cost_usd)
        size = self.context.window()  # learned, configured, catalog or provider (context.py)
        if size:
            cost = {"amount": round(self.session.cost + self.cost, 6), "currency": "USD"} \
                if (self.session.cost + self.cost) else None
            used = usage.input_tokens + usage.output_tokens
            self.session.emit(ev.UsageReported(used=used, size=size, cost=cost))

    # ------------------------------------------------------------ tools
    def _execute(self, call):
        """Run one model tool call end to end and append its result to the history.

        If the turn dies inside, the call stays in ``_pending_results`` and
        :meth:`close_open_calls` gives the model a matching result.
        """
        result = self.run_tool(new_id("tc"), call.name, call.arguments)
        self._pending_results.remove(call)
        self.session.append_history({"role": "tool", "tool_call_id": call.call_id,
                                     "name": call.name,
                                     "content": scrub_text(self.context.cap_result(
                                         result.text, MODEL_RESULT_CAP)),
                                     "is_error": result.is_error,
                                     **({"images": result.images}
                                        if getattr(result, "images", None) else {})})

    def run_tool(self, call_id, name, arguments):
        """Report, approve and run one call; returns the ToolResult (never raises ToolError)."""
        session = self.session
        tool = self.tools.get(name)
        raw = arguments
        if isinstance(arguments, str):
            try:
                raw = json.loads(arguments) if arguments.strip() else {}
            except ValueError as exc:
                return self._fail(call_id, name, arguments,
                                  f"The arguments for {name} are not valid JSON ({exc}). "
                                  "Send a JSON object.")
        if too_deep(raw):  # never stored: replaying it would fail every later resume
            return self._fail(call_id, name or "unknown tool", None,
                              f"The arguments for {name} nest deeper than {MAX_DEPTH} levels. "
                              "Send flat JSON arguments.")
        if tool is None:
            known = ", ".join(sorted(self.tools))
            return self._fail(call_id, name or "unknown tool", raw,
                              f"Unknown tool {name!r}. Available tools: {known}.")
        ctx = self._context(call_id)
        try:
            args = tool.load(raw)
            title, locations = tool.title(args), tool.locations(args, ctx)
        except ToolError as exc:
            return self._fail(call_id, name, raw, str(exc), kind=tool.kind)
        self._report_pending(call_id, title=title, kind=tool.kind, raw_input=raw,
                             locations=locations, name=name)
        try:
            request = tool.approval(args, ctx)
        except ToolError as exc:
            return self._finish(call_id, ToolResult(str(exc), is_error=True))
        refusal, request = modes.check(getattr(session, "mode", modes.AUTO), tool, title, request)
        if refusal is not None:
            return self._finish(call_id, ToolResult(refusal, is_error=True))
        if request is not None:
            decision = self.ask(call_id, tool, raw, title, locations, request)
            if not decision.allowed:
                self._finish(call_id, ToolResult(decision.reason, is_error=True))
                if decision.abort_turn:
                    raise TurnAborted(decision.reason)
                return ToolResult(f"The user did not allow this call: {decision.reason} "
                                  "Do not retry it unchanged.", is_error=True)
        session.emit(ev.ToolCallReported(call_id, status="in_progress"))
        if session.stopping:  # cancel/close arrived after the approval (or while reporting)
            self._finish(call_id, ToolResult(approvals.CANCELLED, is_error=True))
            raise TurnAborted(approvals.CANCELLED)
        session.commit()  # never hold a store write transaction while a tool works
        try:
            result = tool.run(args, ctx)
        except ToolError as exc:
            result = ToolResult(str(exc), is_error=True)
        except (TurnAborted, gevent.GreenletExit):
            raise
        except Exception as exc:  # noqa: BLE001 - a plug-in's bug is a failed call
            log.exception("tool %s crashed", name)
            result = ToolResult(f"{name} failed: {type(exc).__name__}: {exc}", is_error=True)
        if isinstance(result, str):
            result = ToolResult(result)
        return self._finish(call_id, result)

    def _context(self, call_id):
        session = self.session
        ctx = ToolContext(root=session.root, session_id=session.id, call_id=call_id,
                          access=session.access, settings=self.settings, emit=session.emit,
                          approve=lambda request: self._approve_nested(call_id, request),
                          run_tool=self._nested_call, workdir=session.workdir)
        ctx.images = getattr(session, "images", False)  # read_file may return images
        return ctx

    def _nested_call(self, name, arguments):
        if name in ("shell", "run_code"):
            return ToolResult(f"{name} cannot be called from run_code", is_error=True)
        return self.run_tool(new_id("tc"), name, arguments)

    def _approve_nested(self, call_id, request):
        decision = self.ask(call_id, None, None, request.title, [], request)
        if decision.abort_turn:
            raise TurnAborted(decision.reason)
        return decision.allowed

    def _report_pending(self, call_id, **fields):
        self.open_calls[call_id] = True
        self.session.emit(ev.ToolCallReported(call_id, status="pending", **fields))

    def _fail(self, call_id, title, raw, message, kind="other"):
        self._report_pending(call_id, title=title, kind=kind, raw_input=raw, name=title)
        return self._finish(call_id, ToolResult(message, is_error=True))

    def _finish(self, call_id, result):
        self.open_calls.pop(call_id, None)
        content = result.content or [{"type": "text", "text": result.text[:RESULT_DISPLAY_CAP]}]
        self.session.emit(ev.ToolCallReported(
            call_id, status="failed" if result.is_error else "completed", content=content,
            raw_output=result.raw_output, locations=result.locations))
        return result

    # ------------------------------------------------------------ approvals
    def ask(self, call_id, tool, raw, title, locations, request):
        session = self.session
        session.interaction_seq += 1
        interaction = approvals.Interaction(
            id=f"int_{session.interaction_seq}", revision=1, variant=request.variant,
            call_id=call_id, tool_name=tool.name if tool else "", title=request.title or title,
            kind=tool.kind if tool else "other", raw_input=raw, locations=locations,
            content=request.content, path=request.path)
        lifecycle = session.lifecycle  # sessions/lifecycle.py: running <-> requires_action
        lifecycle.require_action(interaction)
        gate = lifecycle.gate
        decision = gate.decide(interaction) if gate else \
            approvals.Decision.deny(approvals.NOT_SUPPORTED)
        # After session/cancel or session/close is read nothing may resolve to allow, in
        # whatever order the answer and the cancel were read: both mark the lifecycle
        # synchronously in the reader, and resume() runs after the gate returned and after
        # the last point where this greenlet could yield before the grant.
        if not lifecycle.resume(interaction) and decision.allowed:
            decision = approvals.Decision.deny(approvals.CANCELLED, abort_turn=True)
        if decision.allowed:
            self._grant(decision.choice, request)
        return decision

    def _grant(self, choice, request):
        access, path = self.session.access, request.path
        if choice == "allow-tool-session" and request.grant:
            access.allow_tool(request.grant)
        if not path:
            return
        if choice == "allow-folder-session":
            access.allow_read_folder(path)
        elif choice == "allow-edit-file-session":
            access.allow_edit_file(path)
        elif choice == "allow-edit-folder-session":
            access.allow_edit_folder(os.path.dirname(path))

    # ------------------------------------------------------------ endings
    def close_open_calls(self, status):
        """Give every unfinished call a terminal status and the model a matching result."""
        for call_id in list(self.open_calls):
            self.session.emit(ev.ToolCallReported(call_id, status=status))
        self.open_calls.clear()
        for call in self._pending_results:
            self.session.append_history({"role": "tool", "tool_call_id": call.call_id,
                                         "name": call.name, "is_error": True,
                                         "content": f"Not run: the turn ended ({status})."})
        self._pending_results = []
