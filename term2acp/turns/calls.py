"""One tool call of a turn, as an object: :class:`ToolCall` loads and checks the arguments
and reports the call (``prepare``), asks when someone has to (``approve``), runs the tool
and settles the call's record (``perform``). ``turns/rounds.py`` schedules the calls of a
model round; a nested call (run_code's, a file command's shell) runs its three steps in a
row (``run``).

The record operations (report, finish, ask) are ``turns/records.py``'s. What a call uses of its turn:
``session``, ``settings``, ``tools``, ``calls`` (the open records), ``asking``,
``parent_call``, ``abort``, ``set_mode``, ``elicits``, ``watch`` (the checkpoint around a
command) and the turn itself as the one that may start sub-agents. An abort (an allow read
after a cancel or close) is ``TurnAborted``, raised where it is found and sent to the turn
greenlet too (``Turn.abort``).
"""

import json
import logging
from dataclasses import replace

from term2acp.core import approvals, trust
from term2acp.core.elicitation import CANCEL, DECLINE, NOT_SUPPORTED, Elicited
from term2acp.core.approvals import CANCELLED
from term2acp.core.ids import new_id
from term2acp.core.nesting import MAX_ARGUMENT_CHARS, MAX_DEPTH, too_deep
from term2acp.lsp.diagnostics import Watch
from term2acp.tools.base import Plan, ToolContext, ToolError, ToolResult, editor_of
from term2acp.turns import hooks, modes
from term2acp.turns.records import CallRecord, ask, fail, finish, report

log = logging.getLogger(__name__)


class ToolCall:
    """One call (its ``record``, a ``CallRecord``) and the steps that settle it."""

    def __init__(self, turn, record):
        self.turn = turn
        self.record = record
        self.tool = None  # the Tool, once found
        self.args = None  # the loaded arguments
        self.ctx = None  # its ToolContext
        self.plan = None  # the tool's checked Plan, or None
        self.request = None  # the ApprovalRequest still to ask, or None
        self.watch = None  # lsp.diagnostics.Watch: the files it writes, their new errors
        self.result = None  # the settled ToolResult, once it has one

    @property
    def beside_others(self):
        """Whether it may run beside the round's other calls (``Tool.beside_others``)."""
        return self.tool.beside_others

    def run(self):
        """Report, approve and run the call; its ToolResult (never raises ToolError)."""
        if self.prepare() and self.approve():
            return self.perform()
        return self.result

    def prepare(self):
        """Load, check and report the call as pending; True when it goes on to
        :meth:`approve` and :meth:`perform`, False when it is settled (failed, refused:
        ``result``)."""
        turn, record = self.turn, self.record
        session = turn.session
        name, arguments = record.name, record.arguments
        if isinstance(arguments, str) and len(arguments) > MAX_ARGUMENT_CHARS:
            record.arguments = None  # never parsed, stored or shown
            return self._fail(name or "unknown tool", None,
                              f"The arguments for {name} are {len(arguments):,} characters, "
                              f"over the limit of {MAX_ARGUMENT_CHARS:,}; nothing was run. "
                              "Write large content in parts (create_file, then edit_file "
                              "or appending with the shell).")
        tool = turn.tools.get(name)
        raw = arguments
        if isinstance(arguments, str):
            try:
                raw = json.loads(arguments) if arguments.strip() else {}
            except ValueError as exc:
                return self._fail(name, arguments,
                                  f"The arguments for {name} are not valid JSON ({exc}). "
                                  "Send a JSON object.")
        if too_deep(raw):  # never stored: replaying it would fail every later resume
            return self._fail(name or "unknown tool", None,
                              f"The arguments for {name} nest deeper than {MAX_DEPTH} levels. "
                              "Send flat JSON arguments.")
        mode = session.mode
        if tool is not None and not modes.offered(mode, tool):
            return self._fail(name, raw, f"{name} is not available in {mode} mode.")
        if tool is None:
            known = ", ".join(sorted(turn.tools))
            return self._fail(name or "unknown tool", raw,
                              f"Unknown tool {name!r}. Available tools: {known}.")
        self.tool, self.watch = tool, Watch(turn.settings)
        ctx = self.ctx = self._context()
        record.raw_input, record.kind = raw, tool.kind
        if tool.quiet:
            record.quiet = {}
        try:
            args = self.args = tool.load(raw)
            record.title = tool.title_in(args, ctx)
        except ToolError as exc:
            return self._fail(name, raw, str(exc), kind=tool.kind)
        try:
            checked, failure = tool.approval(args, ctx), None
        except ToolError as exc:  # reported as pending, then failed with this message
            checked, failure = None, exc
        plan = self.plan = checked if isinstance(checked, Plan) else None
        request = plan.request if plan is not None else checked
        try:
            locations = plan.locations if plan is not None and plan.locations is not None \
                else tool.locations(args, ctx)
        except ToolError as exc:
            return self._fail(name, raw, str(exc), kind=tool.kind)
        record.locations = locations
        report(turn, record, "pending", title=record.title, kind=record.kind, raw_input=raw,
               locations=locations, name=name)
        if failure is not None:
            return self._settle(ToolResult(str(failure), is_error=True))
        refusal, request = modes.check(mode, tool, record.title, request)
        if refusal is not None:
            return self._settle(ToolResult(refusal, is_error=True))
        said = hooks.before_tool(session, name, raw)
        if said is not None and said.permission == "deny":
            return self._settle(ToolResult(
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
                return self._settle(ToolResult(str(exc), is_error=True))
        self.request = request
        return True

    def approve(self):
        """Ask for the call's request, if it has one: True on an allow (or when nobody has
        to be asked), False when it is settled as refused."""
        if self.request is None:
            return True
        decision = ask(self.turn, self.record, self.request)
        if decision.allowed:
            self.request = None
            return True
        finish(self.turn, self.record, ToolResult(decision.reason, is_error=True))
        if decision.abort_turn:
            self.turn.abort(decision.reason)
        self.result = self.record.result = ToolResult(
            f"The user did not allow this call: {decision.reason} Do not retry it unchanged.",
            is_error=True)
        return False

    def perform(self):
        """Run the prepared (and, if it asked, allowed) call; its settled ToolResult."""
        turn, record, tool, args, ctx, plan = \
            self.turn, self.record, self.tool, self.args, self.ctx, self.plan
        session = turn.session
        report(turn, record, "in_progress")
        if session.stopping:  # cancel/close arrived after the approval (or while reporting):
            report(turn, record, "cancelled")  # it never ran (the model hears "Not run")
            turn.abort(approvals.CANCELLED)
        # No commit here: the store holds no transaction between its thread's trips, and
        # the protocol writer commits what the in_progress update reports before the line
        # goes out (a store failure is raised by the next model round's commit).
        done = turn.watch(tool)
        try:
            result = tool.run(args, ctx) if plan is None else tool.run(args, ctx, plan)
        except ToolError as exc:
            result = ToolResult(str(exc), is_error=True)
        except Exception as exc:  # noqa: BLE001 - a plug-in's bug is a failed call
            log.exception("tool %s crashed", record.name)
            result = ToolResult(f"{record.name} failed: {type(exc).__name__}: {exc}",
                                is_error=True)
        finally:  # (a cancel or an abort, a GreenletExit, goes on: it ends the turn)
            if done is not None:
                done()
        if isinstance(result, str):
            result = ToolResult(result)
        added = hooks.after_tool(session, record.name, record.raw_input, result)
        if added:  # a PostToolUse hook's context, for the model
            result = replace(result, text=f"{result.text}\n\n{added}")
        self._settle(self.watch.report(result, ctx))
        return self.result

    def _fail(self, title, raw, message, kind="other"):
        self.result = fail(self.turn, self.record, title, raw, message, kind)
        return False

    def _settle(self, result):
        self.result = finish(self.turn, self.record, result)
        return False

    # ------------------------------------------------------------ its context
    def _context(self):
        turn, record = self.turn, self.record
        session = turn.session
        checkpoint = session.checkpoint
        return ToolContext(
            root=session.root, session_id=session.id, call_id=record.id,
            access=session.access, settings=turn.settings, emit=session.emit,
            approve=self._approve_nested, run_tool=self._nested_call,
            workdir=session.workdir, editor=editor_of(session),
            extra_roots=session.extra_roots,
            mode=modes.normal(session.mode),  # tools/shell_policy.py
            images=session.images,  # read_file may return images
            checkpoint=checkpoint.before_write if checkpoint is not None else None,
            watch=self.watch.note, choose=self._choose,
            trust=lambda path, data, purpose="": trust.decide(  # core/trust.py
                session, turn.settings, path, data, self._choose, purpose),
            set_mode=turn.set_mode, decide=self._decide, abort=turn.abort,
            elicits=turn.elicits, elicit=self._elicit,
            agents=turn if turn.parent_call is None else None,  # sub-agents: depth 1
            shell=session.shell, language_servers=session.language_servers)

    def _nested_call(self, name, arguments):
        """``ctx.run_tool()``: another tool as a separately reported call (run_code)."""
        if name in ("shell", "run_code"):
            return ToolResult(f"{name} cannot be called from run_code", is_error=True)
        record = CallRecord(new_id("tc"), name, arguments)
        self.turn.calls[record.id] = record
        return ToolCall(self.turn, record).run()

    def _choose(self, request):
        """``ctx.choose()``: the choice id the user allowed, or None (refused, cancelled)."""
        decision = self._decide(request)
        return decision.choice if decision.allowed else None

    def _decide(self, request):
        """``ctx.decide()``: the Decision on ``request`` (an abort ends the turn here)."""
        decision = ask(self.turn, self.record, request, nested=True)
        if decision.abort_turn:
            self.turn.abort(decision.reason)
        return decision

    def _approve_nested(self, request):
        """``ctx.approve()`` from inside the running tool: True only on an allow."""
        return self._decide(request).allowed

    def _elicit(self, question):
        """``ctx.elicit()``: the user's answer to ``question`` (one question at a time, with
        the approvals). The session requires action while it is open; an answer read after
        a cancel or close is a cancel."""
        with self.turn.asking:
            lifecycle = self.turn.session.lifecycle
            gate = lifecycle.gate
            if gate is None or not gate.elicits(question.mode):
                return Elicited(DECLINE, reason=NOT_SUPPORTED)
            lifecycle.require_action(question)
            answer = gate.elicit(self.record.id, question)
            if not lifecycle.resume(question):
                return Elicited(CANCEL, reason=CANCELLED)
            return answer
