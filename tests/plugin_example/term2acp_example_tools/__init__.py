"""Two example tools written as plain blocking functions with ``function_tool``."""

import os

from marshmallow import Schema, fields, validate

from term2acp.core.workspace import contained
from term2acp.tools.plugins import function_tool


def _workspace_file(ctx, path):
    """Resolve ``path`` inside the session root; anything else is refused."""
    real, inside = contained(ctx.root, path)
    if not inside:
        raise ValueError(f"{path} is outside the workspace; give a path inside it")
    return real


class WordCountParams(Schema):
    path = fields.String(required=True, metadata={
        "description": "Text file inside the workspace, relative to its root."})


@function_tool(name="word_count", params=WordCountParams, kind="read",
               description="Count the lines, words and characters of a text file in the workspace.",
               title=lambda args: f"Count words in {args.get('path')}")
def word_count(args, ctx):
    with open(_workspace_file(ctx, args["path"]), encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    return f"{text.count(chr(10))} lines, {len(text.split())} words, {len(text)} characters"


class AppendNoteParams(Schema):
    note = fields.String(required=True, validate=validate.Length(min=1, max=500), metadata={
        "description": "One line of text to append to NOTES.md."})


@function_tool(name="append_note", params=AppendNoteParams, kind="edit", approval="always",
               description="Append one line to NOTES.md in the workspace root (asks first).",
               title=lambda args: "Append a note to NOTES.md")
def append_note(args, ctx):
    path = _workspace_file(ctx, "NOTES.md")
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(args["note"].replace("\n", " ") + "\n")
    return f"Appended to {os.path.relpath(path, ctx.root)}."
