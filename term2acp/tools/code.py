"""The ``code`` tool: the language server's definition, references, hover, document symbols
and workspace symbol search (``lsp/queries.py``), located by path, line and column, or by a
symbol name alone. It only reads, so it is offered in every mode, read-only and plan
included, and always (the tool list is part of the prompt cache's prefix): without a
server it says which ones it looks for.
"""

from marshmallow import Schema, ValidationError, fields, validate, validates_schema

from term2acp.lsp import files, queries
from term2acp.tools.base import Tool, ToolError, ToolResult
from term2acp.tools.paths import can_read, located, read_plan, readable_path

OPERATIONS = ("definition", "references", "hover", "document_symbols", "workspace_symbols")
WHAT = {"definition": "definitions", "references": "references", "hover": "hover",
        "document_symbols": "symbols", "workspace_symbols": "symbols"}


class CodeParams(Schema):
    operation = fields.String(required=True, validate=validate.OneOf(OPERATIONS), metadata={
        "description": "What to ask the language server."})
    path = fields.String(load_default=None, metadata={
        "description": "The file, relative to the workspace root or absolute. Needed for "
                       "document_symbols; with line and column it locates a symbol."})
    line = fields.Integer(load_default=None, validate=validate.Range(min=1), metadata={
        "description": "1-based line of the symbol in path."})
    column = fields.Integer(load_default=None, validate=validate.Range(min=1), metadata={
        "description": "1-based column (character) of the symbol in that line."})
    symbol = fields.String(load_default=None, validate=validate.Length(min=1), metadata={
        "description": "A symbol name: instead of line and column (searched in path, or in "
                       "the whole workspace), or the query of workspace_symbols."})

    @validates_schema
    def _located(self, data, **kwargs):
        operation, path = data.get("operation"), data.get("path")
        if (data.get("line") is None) != (data.get("column") is None):
            raise ValidationError("give both line and column, or neither", "column")
        if operation == "document_symbols" and not path:
            raise ValidationError("document_symbols needs a path", "path")
        if operation == "workspace_symbols" and not data.get("symbol"):
            raise ValidationError("workspace_symbols needs a symbol (the name to search)", "symbol")
        if operation in ("definition", "references", "hover") and not data.get("symbol") \
                and not (path and data.get("line")):
            raise ValidationError("give path, line and column, or a symbol name", "symbol")


class CodeTool(Tool):
    name = "code"
    kind = "search"
    Params = CodeParams
    description = (
        "Ask the workspace's language server (Python, TypeScript/JavaScript, Go, Rust, C/C++ "
        "when installed) instead of grepping: definition, references, hover (type and docs), "
        "document_symbols (the outline of a file) or workspace_symbols (search symbol names). "
        "Locate a symbol by path with its 1-based line and column, or by symbol (its name) "
        "alone. Answers are lines path:line:column: source line.")

    def title(self, args):
        where = args.get("symbol") or ""
        if args.get("path"):
            where = args["path"] + (f":{args['line']}:{args['column']}" if args.get("line") else "") \
                + (f" {where}" if where else "")
        return f"Code {args.get('operation', '').replace('_', ' ')} {where}".strip()

    def locations(self, args, ctx):
        return located(ctx, args["path"], line=args.get("line") or 1) if args.get("path") else []

    def approval(self, args, ctx):
        if not args.get("path"):
            return None
        return read_plan(ctx, args["path"], self.title(args), line=args.get("line") or 1)

    def run(self, args, ctx, plan=None):
        real = readable_path(ctx, args["path"], plan) if args.get("path") else None
        if ctx.language_servers is None:
            raise ToolError("No language servers are available here (no session).")
        group = ctx.language_servers.of(ctx.root, ctx.settings)
        ask = queries.Ask(group, ctx.root, ctx.settings, readable=lambda p: can_read(ctx, p))
        operation = args["operation"]
        try:
            lines = answer(ask, operation, real, args)
        except queries.Failed as exc:
            raise ToolError(str(exc)) from None
        text = queries.bounded(lines, WHAT[operation]) if operation != "hover" else "\n".join(lines)
        return ToolResult(text or "No answer.")


def answer(ask, operation, real, args):
    """The lines answering one call."""
    line, column, symbol = args.get("line"), args.get("column"), args.get("symbol")
    if operation == "document_symbols":
        return ask.symbol_lines(ask.document_symbols(real))
    if operation == "workspace_symbols":
        return ask.symbol_lines(ask.workspace_symbols(symbol, real))
    if real is not None and line is not None:
        return ask.at(operation, real, line, column)
    # by name: its declarations, in path or in the workspace
    found = ask.document_symbols(real) if real is not None else ask.workspace_symbols(symbol)
    short = symbol.split(".")[-1]
    exact = [ask.named(s) for s in found if s[0] == symbol or s[0].split(".")[-1] == short]
    if not exact:
        where = "in " + args["path"] if real is not None else "in the workspace"
        return [f"No symbol named {symbol} {where}; try workspace_symbols with part of the name."]
    out = []
    for _name, _kind, path, line0, units in exact[:queries.MAX_BY_NAME]:
        text = files.line_at(files.lines_of(ask.text(path) or ""), line0)
        out += ask.at(operation, path, line0 + 1, files.to_column(text, units))
    return list(dict.fromkeys(out))  # an import and its source lead to the same places
