"""``ask_user``: the model asks the user a question and waits for the answer.

When the editor takes form questions (``elicitation.form``), the question is an
``elicitation/create`` with one string property (an ``enum`` of the options when the model
gave some); otherwise a ``session/request_permission`` whose options are the choices plus
one to dismiss (with no options the permission request cannot carry free text, so only
the elicitation can ask an open question). The answer is the tool result; a decline says
so; a cancel (or ``session/cancel`` while the question is open) ends the turn cancelled.
"""

from marshmallow import Schema, fields, validate

from term2acp.core import elicitation as el
from term2acp.core.approvals import CANCELLED, QUESTION, ApprovalRequest
from term2acp.tools.base import Tool, ToolError, ToolResult

MAX_OPTIONS = 20
DISMISS = "question-dismiss"


class AskUserParams(Schema):
    question = fields.String(required=True, validate=validate.Length(min=1, max=4000),
                             metadata={"description": "The question, in one or two sentences."})
    options = fields.List(fields.String(validate=validate.Length(min=1, max=200)),
                          load_default=None, allow_none=True,
                          validate=validate.Length(max=MAX_OPTIONS),
                          metadata={"description": "Optional: the answers to choose from "
                                                   "(short, distinct)."})


class AskUserTool(Tool):
    name = "ask_user"
    kind = "think"
    Params = AskUserParams
    description = (
        "Ask the user a question and wait for the answer. Use it only when you cannot go on "
        "without the user's decision (which of two designs, a missing value); do not ask "
        "what you can find out by reading. Give options when the answer is one of a few "
        "choices.")

    def title(self, args):
        return f"Question: {args['question'][:120]}"

    def run(self, args, ctx):
        question = args["question"].strip()
        options = list(dict.fromkeys(o.strip() for o in args.get("options") or () if o.strip()))
        if ctx.elicits(el.FORM):
            answer = ctx.elicit(el.string_question(question, options))
            if answer.action == el.ACCEPT:
                return ToolResult(f"The user answered: {answer.content.get('answer', '')}")
            if answer.action == el.DECLINE:
                return ToolResult("The user declined to answer. Go on without the answer, or "
                                  "say what you need and end your turn.")
            ctx.abort(answer.reason or "The user cancelled the question.")
        if not options:
            raise ToolError("This editor cannot take a free-text question: ask again with "
                            "options, or end your turn with the question in your answer.")
        return self._by_permission(question, options, ctx)

    def _by_permission(self, question, options, ctx):
        choices = tuple((f"answer-{i}", option, "allow_once") for i, option in
                        enumerate(options)) + ((DISMISS, "Dismiss", "reject_once"),)
        decision = ctx.decide(ApprovalRequest(variant=QUESTION, title=question,
                                              content=[{"type": "text", "text": question}],
                                              choices=choices))
        if decision.allowed:
            return ToolResult(f"The user answered: {options[int(decision.choice[7:])]}")
        if decision.reason == CANCELLED:
            ctx.abort(CANCELLED)
        return ToolResult("The user dismissed the question. Go on without the answer, or say "
                          "what you need and end your turn.")
