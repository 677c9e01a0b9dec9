"""The steps of one tool call, for the turn that owns it: load and check the arguments,
report the call, apply the session's mode, ask (one question at a time), run the tool,
settle its record, and at the end of a turn close what is still open.

:class:`CallSteps` is the part of ``Turn`` (``turns/turn.py``) that works on one
``CallRecord``; ``turns/rounds.py`` drives these steps for the calls of a model round side
by side. An abort (an allow read after a cancel or close) is ``TurnAborted``, raised where
it is found and sent to the turn greenlet too.
"""

import json
import logging
from dataclasses import replace

import gevent

from term2acp.core import approvals, trust
from term2acp.core import events as ev
from term2acp.core.approvals import CANCELLED
from term2acp.core.cancel import TurnAborted
from term2acp.core.commandline import shown_prefix
from term2acp.core.elicitation import CANCEL, DECLINE, NOT_SUPPORTED, Elicited
from term2acp.core.ids import new_id
from term2acp.core.nesting import MAX_ARGUMENT_CHARS, MAX_DEPTH, too_deep
from term2acp.core.text import scrub_text
from term2acp.lsp.diagnostics import Watch
from term2acp.tools.base import Plan, ToolContext, ToolError, ToolResult, editor_of
from term2acp.turns import hooks, modes
from term2acp.turns.rounds import CallRecord, Ready

log = logging.getLogger(__name__)

RESULT_DISPLAY_CAP = 16_000
MODEL_RESULT_CAP = 100_000


class CallSteps:
    """Mixed into ``Turn``, which has ``session``, ``settings``, ``tools``, ``calls``,
    ``context``, ``asking``, ``greenlet``, ``ended``, ``parent_call`` and ``_watch``."""

    def answer(self, record, result):
        """Put a model call's settled result in the history (the round keeps model order).

        If the turn dies before, the record stays unanswered and :meth:`close_open_calls`
        gives the model its result (the real one when it had settled, else a note)."""
        record.answered = True
        self.calls.pop(record.id, None)
        self.ended = self.ended or getattr(result, "end_turn", False)
        self.session.append_history(self._tool_message(record, result))

    def _tool_message(self, record, result):
        return {"role": "tool", "tool_call_id": record.model_id, "name": record.name,
                "content": scrub_text(self.context.cap_result(result.text, MODEL_RESULT_CAP)),
                "is_error": result.is_error,
                **({"images": result.images} if getattr(result, "images", None) else {}),
                **({"cost": round(result.cost, 8)} if getattr(result, "cost", None) else {})}

    def run_tool(self, record):
        """Report, approve and run one call; returns the ToolResult (never raises ToolError)."""
        step = self.prepare(record)
        if isinstance(step, Ready) and step.request is not None:
            step = self.approve_call(record, step)
        return self.perform(record, step) if isinstance(step, Ready) else step

    def prepare(self, record):
        """Load, check and report one call as pending: a settled ToolResult (it failed or
        was refused), or what :meth:`approve_call` and :meth:`perform` need (:class:`Ready`;
        its ``request`` is None when nobody has to be asked)."""
        session = self.session
        name, arguments = record.name, record.arguments
        if isinstance(arguments, str) and len(arguments) > MAX_ARGUMENT_CHARS:
            record.arguments = None  # never parsed, stored or shown
            return self._fail(record, name or "unknown tool", None,
                              f"The arguments for {name} are {len(arguments):,} characters, "
                              f"over the limit of {MAX_ARGUMENT_CHARS:,}; nothing was run. "
                              "Write large content in parts (create_file, then edit_file "
                              "or appending with the shell).")
        tool = self.tools.get(name)
        raw = arguments
        if isinstance(arguments, str):
            try:
                raw = json.loads(arguments) if arguments.strip() else {}
            except ValueError as exc:
                return self._fail(record, name, arguments,
                                  f"The arguments for {name} are not valid JSON ({exc}). "
                                  "Send a JSON object.")
        if too_deep(raw):  # never stored: replaying it would fail every later resume
            return self._fail(record, name or "unknown tool", None,
                              f"The arguments for {name} nest deeper than {MAX_DEPTH} levels. "
                              "Send flat JSON arguments.")
        if tool is not None and not modes.offered(getattr(session, "mode", modes.AUTO), tool):
            return self._fail(record, name, raw, f"{name} is not available in "
                              f"{getattr(session, 'mode', modes.AUTO)} mode.")
        if tool is None:
            known = ", ".join(sorted(self.tools))
            return self._fail(record, name or "unknown tool", raw,
                              f"Unknown tool {name!r}. Available tools: {known}.")
        watch = Watch(self.settings)  # the files it writes: their new errors
        ctx = self._context(record, watch)
        record.raw_input, record.kind = raw, tool.kind
        if tool.quiet:
            record.quiet = {}
        try:
            args = tool.load(raw)
            record.title = tool.title_in(args, ctx)
        except ToolError as exc:
            return self._fail(record, name, raw, str(exc), kind=tool.kind)
        try:
            checked, failure = tool.approval(args, ctx), None
        except ToolError as exc:  # reported as pending, then failed with this message
            checked, failure = None, exc
        plan = checked if isinstance(checked, Plan) else None
        request = plan.request if plan is not None else checked
        try:
            locations = plan.locations if plan is not None and plan.locations is not None \
                else tool.locations(args, ctx)
        except ToolError as exc:
            return self._fail(record, name, raw, str(exc), kind=tool.kind)
        record.locations = locations
        self._report(record, "pending", title=record.title, kind=record.kind, raw_input=raw,
                     locations=locations, name=name)
        if failure is not None:
            return self._finish(record, ToolResult(str(failure), is_error=True))
        refusal, request = modes.check(getattr(session, "mode", modes.AUTO), tool,
                                       record.title, request)
        if refusal is not None:
            return self._finish(record, ToolResult(refusal, is_error=True))
        said = hooks.before_tool(session, name, raw)
        if said is not None and said.permission == "deny":
            return self._finish(record, ToolResult(
                f"A PreToolUse hook denied this call: {said.reason or 'no reason given'}",
                is_error=True))
        if said is not None and said.permission == "ask" and request is None:
            request = approvals.ApprovalRequest(  # asked even where the mode would not
                title=f"{record.title} (a hook asks: {said.reason or 'allow this call?'})")
        elif said is not None and said.permission == "allow":
            request = None
        if request is not None and not request.content and plan is not None:
            try:  # the mode asks where the tool would not: show what would change
                request.content = tool.preview(args, ctx, plan)
            except ToolError as exc:
                return self._finish(record, ToolResult(str(exc), is_error=True))
        return Ready(tool, args, ctx, plan, request, watch)

    def approve_call(self, record, ready):
        """Ask for ``ready.request``: ``ready`` again on an allow, else the settled denial."""
        decision = self.ask(record, ready.request)
        if decision.allowed:
            ready.request = None
            return ready
        self._finish(record, ToolResult(decision.reason, is_error=True))
        if decision.abort_turn:
            self._abort(decision.reason)
        record.result = ToolResult(f"The user did not allow this call: {decision.reason} "
                                   "Do not retry it unchanged.", is_error=True)
        return record.result

    def perform(self, record, ready):
        """Run a prepared (and, if it asked, allowed) call; its settled ToolResult."""
        session, tool, args, ctx, plan = self.session, ready.tool, ready.args, ready.ctx, ready.plan
        self._report(record, "in_progress")
        if session.stopping:  # cancel/close arrived after the approval (or while reporting):
            self._report(record, "cancelled")  # it never ran (the model hears "Not run")
            self._abort(approvals.CANCELLED)
        # No commit here: the store holds no transaction between its thread's trips, and
        # the protocol writer commits what the in_progress update reports before the line
        # goes out (a store failure is raised by the next model round's commit).
        done = self._watch(tool)
        try:
            result = tool.run(args, ctx) if plan is None else tool.run(args, ctx, plan)
        except ToolError as exc:
            result = ToolResult(str(exc), is_error=True)
        except gevent.GreenletExit:  # a cancel or an abort (TurnAborted) ends the turn
            raise
        except Exception as exc:  # noqa: BLE001 - a plug-in's bug is a failed call
            log.exception("tool %s crashed", record.name)
            result = ToolResult(f"{record.name} failed: {type(exc).__name__}: {exc}",
                                is_error=True)
        finally:
            if done is not None:
                done()
        if isinstance(result, str):
            result = ToolResult(result)
        added = hooks.after_tool(session, record.name, record.raw_input, result)
        if added:  # a PostToolUse hook's context, for the model
            result = replace(result, text=f"{result.text}\n\n{added}")
        return self._finish(record, ready.watch.report(result, ctx))

    def _context(self, record, watch):
        session = self.session
        checkpoint = getattr(session, "checkpoint", None)
        choose = lambda request: self._choose(record, request)  # noqa: E731
        return ToolContext(
            root=session.root, session_id=session.id, call_id=record.id,
            access=session.access, settings=self.settings, emit=session.emit,
            approve=lambda request: self._approve_nested(record, request),
            run_tool=self._nested_call, workdir=session.workdir, editor=editor_of(session),
            extra_roots=getattr(session, "extra_roots", ()),
            mode=modes.normal(getattr(session, "mode", None)),  # tools/shell_policy.py
            images=getattr(session, "images", False),  # read_file may return images
            checkpoint=checkpoint.before_write if checkpoint is not None else None,
            watch=watch.note, choose=choose,
            trust=lambda path, data, purpose="": trust.decide(  # core/trust.py
                session, self.settings, path, data, choose, purpose),
            set_mode=self._set_mode,
            decide=lambda request: self._decide(record, request),
            abort=self._abort, elicits=self._elicits,
            elicit=lambda question: self._elicit(record, question),
            agents=self if self.parent_call is None else None,  # sub-agents: depth 1
            shell=session.shell, language_servers=session.language_servers)

    def _nested_call(self, name, arguments):
        if name in ("shell", "run_code"):
            return ToolResult(f"{name} cannot be called from run_code", is_error=True)
        record = CallRecord(new_id("tc"), name, arguments)
        self.calls[record.id] = record
        return self.run_tool(record)

    def _choose(self, record, request):
        """``ctx.choose()``: the choice id the user allowed, or None (refused, cancelled)."""
        decision = self._decide(record, request)
        return decision.choice if decision.allowed else None

    def _decide(self, record, request):
        """``ctx.decide()``: the Decision on ``request`` (an abort ends the turn here)."""
        decision = self.ask(record, request, nested=True)
        if decision.abort_turn:
            self._abort(decision.reason)
        return decision

    def _set_mode(self, mode):
        """Switch the session's mode as ``session/set_config_option`` does (reported, stored)."""
        session = self.session
        options = getattr(session, "config_options", None)
        if options is not None:
            options.set(session, "mode", mode)
        else:
            session.mode = mode

    def _approve_nested(self, record, request):
        """``ctx.approve()`` from inside a running tool: True only on an allow."""
        decision = self.ask(record, request, nested=True)
        if decision.abort_turn:
            self._abort(decision.reason)
        return decision.allowed

    def _elicits(self, mode):
        gate = self.session.lifecycle.gate
        return gate is not None and gate.elicits(mode)

    def _elicit(self, record, question):
        """``ctx.elicit()``: the user's answer to ``question`` (one question at a time, with
        the approvals). The session requires action while it is open; an answer read after
        a cancel or close is a cancel."""
        with self.asking:
            lifecycle = self.session.lifecycle
            gate = lifecycle.gate
            if gate is None or not gate.elicits(question.mode):
                return Elicited(DECLINE, reason=NOT_SUPPORTED)
            lifecycle.require_action(question)
            answer = gate.elicit(record.id, question)
            if not lifecycle.resume(question):
                return Elicited(CANCEL, reason=CANCELLED)
            return answer

    def _abort(self, reason):
        """End the turn as cancelled. Raised where the abort was found; when that is not the
        turn greenlet (a tool's helper, e.g. run_code answering a nested call), the turn
        greenlet gets it too, so no tool can keep the turn going past it."""
        aborted = TurnAborted(reason)
        turn = self.greenlet
        if isinstance(turn, gevent.Greenlet) and turn is not gevent.getcurrent():
            turn.kill(aborted, block=False)
        raise aborted

    # ------------------------------------------------------------ the records
    def _report(self, record, status, **fields):
        record.status = status
        if record.quiet is not None:  # shown by its own updates (the plan): only a failure
            record.quiet.update((k, v) for k, v in fields.items() if v is not None)
            if status != "failed":
                return
            held, record.quiet = record.quiet, None
            pending = {k: held[k] for k in ("title", "kind", "raw_input", "locations", "name")
                       if k in held}
            self.session.emit(ev.ToolCallReported(record.id, status="pending", **pending))
        self.session.emit(ev.ToolCallReported(record.id, status=status, **fields))

    def _fail(self, record, title, raw, message, kind="other"):
        record.title, record.raw_input, record.kind = title, raw, kind
        self._report(record, "pending", title=title, kind=kind, raw_input=raw, name=title)
        return self._finish(record, ToolResult(message, is_error=True))

    def _finish(self, record, result):
        content = result.content or [{"type": "text", "text": result.text[:RESULT_DISPLAY_CAP]}]
        record.content, record.result = content, result
        if result.locations is not None:
            record.locations = result.locations
        self._report(record, "failed" if result.is_error else "completed", content=content,
                     raw_output=result.raw_output, locations=result.locations)
        if record.model_id is None:  # a nested call is settled now; a model call once answered
            self.calls.pop(record.id, None)
        return result

    # ------------------------------------------------------------ approvals
    def ask(self, record, request, nested=False):
        """The decision on ``request`` for the call ``record``. ``nested``: asked from inside
        the running tool (``ctx.approve``); the interaction then shows the request alone."""
        with self.asking:  # calls running side by side ask one at a time
            return self._ask(record, request, nested)

    def _ask(self, record, request, nested):
        session = self.session
        session.interaction_seq += 1
        interaction = approvals.Interaction(
            id=f"int_{session.interaction_seq}", variant=request.variant,
            call_id=record.id, tool_name="" if nested else record.name,
            title=request.title or ("" if nested else record.title),
            kind="other" if nested else record.kind,
            raw_input=None if nested else record.raw_input,
            locations=[] if nested else record.locations,
            content=request.content, path=request.path,
            prefix=shown_prefix(request.prefix), offered=request.choices,
            parent=self.parent_call)
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
            session.access.grant(decision.choice, request)
        _record_question(session, record, interaction, decision)
        return decision

    # ------------------------------------------------------------ endings
    def close_open_calls(self, status):
        """Give every unfinished call a terminal status and the model a matching result."""
        records = list(self.calls.values())
        self.calls.clear()
        for record in records:
            if record.open:
                self._report(record, status)
        for record in records:
            if record.unanswered:
                if record.result is not None and record.status in ("completed", "failed"):
                    self.answer(record, record.result)  # settled before the round gave it back
                    continue
                record.answered = True
                self.session.append_history({"role": "tool", "tool_call_id": record.model_id,
                                             "name": record.name, "is_error": True,
                                             "content": f"Not run: the turn ended ({status})."})


def _record_question(session, record, interaction, decision):
    """The question and its answer, for export (sessions/recording.py)."""
    recording = getattr(session, "recording", None)
    if recording is None:
        return
    kinds = {cid: kind for cid, _label, kind in interaction.choices}
    recording.permission(getattr(session, "prompt_message_id", None), {
        "call_id": record.id, "model_call_id": record.model_id, "tool": record.name,
        "title": interaction.title, "input": interaction.raw_input, "path": interaction.path,
        "options": [{"optionId": cid, "name": label, "kind": kind}
                    for cid, label, kind in interaction.choices],
        "decision": {"allowed": decision.allowed, "optionId": decision.choice,
                     "kind": kinds.get(decision.choice), "reason": decision.reason}})

