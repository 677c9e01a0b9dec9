"""Slash commands from files: ours and the ones users keep for other agents, unchanged.

Where, the first of a name winning (the project's over the user's, ours over the peers'):

1. ``.term2acp/commands/*.md`` of the workspace;
2. ``.claude/commands/*.md``, then ``.gemini/commands/*.toml`` of the workspace;
3. ``commands/*.md`` of the user's config dir (beside ``config.toml``);
4. ``~/.claude/commands/*.md``, ``~/.gemini/commands/*.toml``, ``~/.codex/prompts/*.md``.

A built-in or plug-in command keeps its name. Markdown files take YAML front matter
(``description``, ``argument-hint``, ``model``); Gemini's TOML ``prompt`` and
``description``. The body becomes the prompt: ``$ARGUMENTS`` (Gemini: ``{{args}}``) is
what the user typed after the name, ``$1`` .. ``$9`` its words (shell-like quoting); a
body with no placeholder gets the arguments appended. A shell expansion (Claude's
``!`cmd```, Gemini's ``!{cmd}``) runs through the sandboxed shell as a call of its own (the
session's mode and approvals apply) before the arguments go in, and its output replaces it;
a workspace file with one runs only once the user trusts its content (``core/trust.py``).
``model:`` makes that prompt's model requests use that model.
"""

import os
import re
import shlex
import tomllib

from term2acp.core.ids import new_id
from term2acp.core.trust import usable
from term2acp.turns import commands, skills, sources, trusting
from term2acp.turns.commands import NAME, Command, ModelPrompt
from term2acp.turns.records import CallRecord

_SHELL = re.compile(r"!`([^`\n]+)`|!\{([^{}\n]+)\}")
_POSITIONAL = re.compile(r"\$([1-9])")
MODEL_CAP = 128
SKILLS = commands.SkillsCommand()


class FileCommand(Command):
    """A command whose body is a prompt for the model (module docstring)."""

    def __init__(self, name, path, data, body, description, hint, model, style, project):
        self.name, self.path, self.data, self.body = name, path, data, body
        self.description, self.hint, self.model = description, hint, model
        self.style, self.project = style, project  # "md" or "toml"; workspace-supplied

    def run(self, argument, ctx):
        turn, body = ctx.turn, self.body
        if _SHELL.search(body):
            if self.project:
                if not trusting.decide(turn, self.path, self.data, "a command with shell "
                                       "expansions"):
                    return (f"/{self.name} was not run: {self.path} runs shell commands and "
                            "is not trusted in this session.")
            body = _SHELL.sub(lambda m: _shell(turn, m.group(1) or m.group(2)), body)
        if self.model:
            turn.model = self.model
        return ModelPrompt(fill(body, argument, self.style).strip())


def fill(body, argument, style="md"):
    """``body`` with the arguments in (module docstring)."""
    argument = argument.strip()
    if style == "toml":
        if "{{args}}" in body:
            return body.replace("{{args}}", argument)
        return f"{body.rstrip()}\n\n{argument}" if argument else body
    words = _words(argument)
    used = "$ARGUMENTS" in body or _POSITIONAL.search(body)
    body = body.replace("$ARGUMENTS", argument)
    body = _POSITIONAL.sub(lambda m: words[int(m.group(1)) - 1]
                           if int(m.group(1)) <= len(words) else "", body)
    if not used and argument:
        body = f"{body.rstrip()}\n\nARGUMENTS: {argument}"
    return body


def _words(argument):
    try:
        return shlex.split(argument)
    except ValueError:  # an open quote: plain words
        return argument.split()


def _shell(turn, command):
    """Run ``command`` as the shell tool would for the model; its output (or why not)."""
    record = CallRecord(new_id("tc"), "shell", {"command": command.strip()})
    turn.calls[record.id] = record
    result = turn.run_tool(record)
    text = result.text
    if not result.is_error and text.endswith("exit code 0"):
        text = text[: -len("exit code 0")]
    return text.rstrip("\n")


# ---------------------------------------------------------------- parsing
def parse_markdown(path, data, project):
    name = _name(path, ".md")
    if name is None:
        return None
    fields, body = sources.front_matter(data.decode("utf-8", "replace"))
    return _command(name, path, data, body, fields, "md", project)


def parse_toml(path, data, project):
    name = _name(path, ".toml")
    if name is None:
        return None
    fields = tomllib.loads(data.decode("utf-8", "replace"))
    body = fields.get("prompt")
    if not isinstance(body, str) or not body.strip():
        raise ValueError('a Gemini command needs a "prompt" string')
    return _command(name, path, data, body, fields, "toml", project)


def _name(path, suffix):
    name = os.path.basename(path)[: -len(suffix)]
    return name if NAME.match(name) else None


def _command(name, path, data, body, fields, style, project):
    description = sources.text_field(fields, "description") or _first_line(body) or \
        f"Prompt from {os.path.basename(path)}"
    hint = sources.text_field(fields, "argument-hint", "argument_hint")
    if hint is None and ("$ARGUMENTS" in body or "{{args}}" in body or _POSITIONAL.search(body)):
        hint = "arguments"
    model = sources.text_field(fields, "model")
    if model is not None and (len(model) > MODEL_CAP or " " in model):
        model = None
    return FileCommand(name, path, data, body, description[:200], hint and hint[:200], model,
                       style, project)


def _first_line(body):
    for line in body.splitlines():
        line = line.strip().lstrip("#").strip()
        if line and not _SHELL.search(line):
            return line[:100]
    return None


# ---------------------------------------------------------------- the folders
class FileCommands:
    """One session's command folders (``session.file_commands``), looked at each prompt."""

    def __init__(self, root, settings):
        self.root = root
        home, mine = sources.home(settings), sources.config_dir(settings)
        md, toml = sources.files_ending(".md"), sources.files_ending(".toml")

        def folder(path, pick, parse, project):
            return sources.Folder(path, pick, lambda p, d: parse(p, d, project), project)
        places = [
            (os.path.join(root, ".term2acp", "commands"), md, parse_markdown, True),
            (os.path.join(root, ".claude", "commands"), md, parse_markdown, True),
            (os.path.join(root, ".gemini", "commands"), toml, parse_toml, True),
        ]
        if mine:
            places.append((os.path.join(mine, "commands"), md, parse_markdown, False))
        places += [
            (os.path.join(home, ".claude", "commands"), md, parse_markdown, False),
            (os.path.join(home, ".gemini", "commands"), toml, parse_toml, False),
            (os.path.join(home, ".codex", "prompts"), md, parse_markdown, False),
        ]
        seen, self.folders = set(), []
        for path, pick, parse, project in places:
            real = os.path.realpath(path)
            if real not in seen:  # a workspace in the home folder: each folder once
                seen.add(real)
                self.folders.append(folder(path, pick, parse, project))
        self.foreign = []

    def scan(self, taken=()):
        """``name -> FileCommand`` (the first of a name wins; ``taken`` names stay out)."""
        found, self.foreign = {}, []
        for folder in self.folders:
            items, foreign = folder.scan()
            self.foreign += foreign
            for command in items:
                if command.name not in taken and command.name not in found:
                    found[command.name] = command
        return found


def of(session, settings):
    """The session's :class:`FileCommands` (made on first use, again if its root moved)."""
    state = session.file_commands
    if state is None or state.root != session.root:
        state = session.file_commands = FileCommands(session.root, settings)
    return state


def listed(session, settings, tell=True):
    """``name -> Command`` of ``session``: the built-ins and plug-ins, what its MCP servers
    bring, ``/skills`` when it has skills, then its file commands; ``tell``: a workspace
    file another user owns is named to the user (once)."""
    known = commands.for_session(session)  # with what its MCP servers bring
    if skills.refresh(session, settings, tell).found:
        known = {**known, SKILLS.name: SKILLS}
    files = of(session, settings)
    found = files.scan(known)
    for path in files.foreign if tell else ():
        usable(session, path)
    return {**known, **found} if found else known
