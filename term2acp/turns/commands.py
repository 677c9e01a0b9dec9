"""Slash commands: ``/compact``, ``/init``, ``/model <id>``, ``/mode <id>`` and plug-ins.

A prompt whose text, or whose last text block, starts with a known ``/name`` runs that
command in the turn; an unknown ``/word`` goes to the model unchanged. A command's turn ends with ``end_turn``
and is replayed like any prompt (the user's message is recorded before it runs). A
command either answers itself (shown as the agent's message) or hands the model a
prompt (``/init``), which then runs through the normal tools and approvals.

Plug-in commands come from the entry-point group ``term2acp.commands`` (next to the tool
plug-ins' ``term2acp.tools``); an entry point names a :class:`Command`, e.g. one made
with :func:`function_command`::

    @function_command(name="hello", description="Say hello", hint="name")
    def hello(argument, ctx):
        return f"Hello {argument or 'world'} from {ctx.root}"

The function returns text to show, or :class:`ModelPrompt` to ask the model.
"""

import importlib.metadata
import logging
import re

from term2acp.core import events as ev
from term2acp.core import loading
from term2acp.core.ids import new_id
from term2acp.turns import compaction, modes
from term2acp.turns.titles import rename
from term2acp.turns.rewind import rewind
from term2acp.turns.undo import undo_last

log = logging.getLogger(__name__)

GROUP = "term2acp.commands"
NAME = re.compile(r"[A-Za-z0-9_-]{1,64}\Z")
# A session's MCP prompts are /<server>:<prompt>: the colon (and a dot) is theirs.
_COMMAND_LINE = re.compile(r"/([A-Za-z0-9_.:-]{1,130})(?:\s+(.*))?\Z", re.S)

INIT_PROMPT = (
    "Write or update AGENTS.md at the root of this project ({root}): concise instructions "
    "for coding agents working here. Read the project first (README, build and test "
    "configuration, the layout of the source). Cover: what the project is, how to build, "
    "run and test it, the code layout, and the conventions a contributor must follow. If "
    "AGENTS.md exists, keep what is still true and improve it. Use the file tools to write "
    "the file.")


class ModelPrompt:
    """A command's answer that is sent to the model as the user's request."""

    def __init__(self, text):
        self.text = text


class CommandContext:
    """What a running command may use."""

    def __init__(self, turn):
        self.turn = turn
        self.session = turn.session
        self.root = turn.session.root
        self.config_options = turn.session.config_options


class Command:
    name = ""
    description = ""
    hint = None  # text input hint, or None when the command takes no input
    in_history = True  # the command and its answer join the model's conversation

    def run(self, argument, ctx):
        raise NotImplementedError

    def wire(self):
        """Runtime-neutral description: name, description, hint."""
        return {"name": self.name, "description": self.description, "hint": self.hint}


class _FunctionCommand(Command):
    def __init__(self, function, name, description, hint):
        self.function, self.name, self.description, self.hint = function, name, description, hint

    def run(self, argument, ctx):
        return self.function(argument, ctx)


def function_command(name, description, hint=None):
    def wrap(function):
        return _FunctionCommand(function, name, description, hint)
    return wrap


# ---------------------------------------------------------------- built-ins
class CompactCommand(Command):
    name = "compact"
    description = "Compact the conversation now (summarize older turns to free context)"
    in_history = False  # the compaction itself is what the history keeps

    def run(self, argument, ctx):
        turn = ctx.turn
        try:
            compaction.compact(ctx.session, turn.provider, turn.system, turn.settings,
                               reason="manual")
        except compaction.CompactionFailed as exc:
            text = str(exc) or "compacting failed"
            return text[0].upper() + text[1:] + "."
        return None  # the compaction reports itself (compaction_update or a message)


class InitCommand(Command):
    name = "init"
    description = "Ask the agent to write or update AGENTS.md for this project"

    def run(self, argument, ctx):
        mode = ctx.session.mode
        if mode in (modes.READ_ONLY, modes.PLAN):
            return (f"/init writes AGENTS.md, and the session is in {mode} mode: switch the "
                    "mode to ask or auto (/mode ask) and run /init again.")
        text = INIT_PROMPT.format(root=ctx.root)
        if argument.strip():
            text += f"\n\nThe user adds: {argument.strip()}"
        return ModelPrompt(text)


class _OptionCommand(Command):
    option = ""

    def run(self, argument, ctx):
        value = argument.strip()
        if ctx.config_options is None:
            return f"/{self.name} is not available in this session."
        current = {o["id"]: o for o in ctx.config_options.options(ctx.session)}.get(self.option)
        if not value:
            if current is None:
                return f"There is no {self.option} to choose in this session."
            choices = ", ".join(v for v, _n, _d in current["values"])
            return f"Current {self.option}: {current['current']}. Choices: {choices}."
        try:
            changed = ctx.config_options.set(ctx.session, self.option, value)
        except ValueError as exc:  # InvalidOptionValue: the message lists the values
            return f"/{self.name}: {exc}"
        now = getattr(ctx.session, self.option)
        return f"{self.option.capitalize()} set to {now}." if changed else \
            f"{self.option.capitalize()} is already {now}."


class ModelCommand(_OptionCommand):
    name = "model"
    option = "model"
    description = "Switch the model (from the next model request)"
    hint = "model id"


class ModeCommand(_OptionCommand):
    name = "mode"
    option = "mode"
    description = "Switch the mode: read-only, plan, ask or auto"
    hint = "read-only | plan | ask | auto"


class UndoCommand(Command):
    name = "undo"
    description = ("Undo the last turn: put back the files it changed and take it out of "
                   "the conversation (again to go further back)")
    in_history = False  # the undo is what the history shows

    def run(self, argument, ctx):
        return undo_last(ctx.session)


class RewindCommand(Command):
    name = "rewind"
    description = ("List the turns; /rewind N takes back turn N and every later one (files "
                   "and conversation, as /undo does)")
    hint = "turn number"
    in_history = False  # the rewind is what the history shows

    def run(self, argument, ctx):
        return rewind(ctx.session, argument)


class RenameCommand(Command):
    name = "rename"
    description = "Rename this session"
    hint = "new title"
    in_history = False

    def run(self, argument, ctx):
        title = rename(ctx.session, argument)
        return f"Renamed the session to \u201c{title}\u201d." if title else \
            "Usage: /rename <title> (the new title of this session)."


class SkillsCommand(Command):
    name = "skills"
    description = "List the skills the model can load (Agent Skills folders)"
    in_history = False

    def run(self, argument, ctx):
        skills = ctx.session.skills
        found = skills.found if skills is not None else {}
        if not found:
            return ("No skills: put a folder with a SKILL.md in .term2acp/skills, .claude/skills "
                    "or .agents/skills of the workspace, or in skills/ of your config folder.")
        return "Skills:\n" + "\n".join(f"- {s.name}: {s.description} ({s.path})"
                                       for s in found.values())


# /skills: offered to sessions that have skills (filecommands)
BUILTINS = (CompactCommand(), InitCommand(), ModelCommand(), ModeCommand(), UndoCommand(),
            RenameCommand(), RewindCommand())


# ---------------------------------------------------------------- the registry
_loaded = None


def available():
    """``name -> Command``: built-ins, then plug-ins (a taken name is skipped)."""
    global _loaded
    if _loaded is None:
        commands = {c.name: c for c in BUILTINS}
        for entry_point in _entry_points():
            command = _load(entry_point)
            if command is None:
                continue
            if command.name in commands:
                log.warning("command plug-in %s skipped: /%s is already taken",
                            entry_point.value, command.name)
                continue
            commands[command.name] = command
        _loaded = commands
    return _loaded


def scanned():
    """:func:`available`, its plug-in scan (every distribution's metadata: ms of CPU) in a
    thread of gevent's pool when still to do, not on the hub; no need to wait for the rest
    of the preload (the tools, the sandbox)."""
    if _loaded is None:
        loading.in_thread(available)
    return _loaded


def _entry_points():
    try:
        return sorted(importlib.metadata.entry_points(group=GROUP),
                      key=lambda ep: (ep.name, ep.value))
    except Exception:  # noqa: BLE001 - broken metadata of some distribution
        log.warning("cannot read %s entry points", GROUP, exc_info=True)
        return []


def _load(entry_point):
    try:
        target = entry_point.load()
        command = target() if isinstance(target, type) and issubclass(target, Command) else target
    except Exception as exc:  # noqa: BLE001 - a plug-in never takes the agent down
        log.warning("command plug-in %s skipped: %s: %s", entry_point.value,
                    type(exc).__name__, exc)
        return None
    if not isinstance(command, Command) or not NAME.match(str(command.name)) \
            or not command.description:
        log.warning("command plug-in %s skipped: not a Command with a name and a description",
                    entry_point.value)
        return None
    return command


class _Hosted(Command):
    """A command a session's MCP servers bring (``mcp/prompts.py``): its ``run(argument)``
    answers ``("say", text)`` or ``("prompt", text)``."""

    def __init__(self, hosted):
        self.hosted = hosted
        self.name, self.description, self.hint = hosted.name, hosted.description, hosted.hint
        self.in_history = hosted.in_history

    def run(self, argument, ctx):
        kind, text = self.hosted.run(argument)
        return ModelPrompt(text) if kind == "prompt" else text


def for_session(session):
    """``name -> Command``: :func:`available`, then what the session's MCP servers bring."""
    commands = available()
    hub = session.mcp if session is not None else None
    extra = hub.commands() if hub else ()
    if not extra:
        return commands
    return {**commands, **{c.name: _Hosted(c) for c in extra if c.name not in commands}}


def parse(text, known=None):
    """``(command, argument)`` for a prompt that starts with a known command (of ``known``,
    default :func:`available`), else None."""
    match = _COMMAND_LINE.match(text.strip())
    if match is None:
        return None
    command = (available() if known is None else known).get(match.group(1))
    if command is None:
        return None
    return command, match.group(2) or ""


def run(turn, text, known=None):
    """Run the command ``text`` names, if any (of ``known``: the session's, with its file
    commands). Returns None (not a command: the model gets ``text``), ``""`` (the command
    answered; the turn ends) or a prompt for the model. A command starts the prompt, or the
    user's own words after attached context blocks (``text.typed``, turns/content.py)."""
    found = parse(text, known)
    typed = getattr(text, "typed", "")
    if found is None and typed and typed != text:
        found = parse(typed, known)
        text = typed
    if found is None:
        return None
    command, argument = found
    try:
        answer = command.run(argument, CommandContext(turn))
    except Exception as exc:  # noqa: BLE001 - a command's failure is an answer
        log.exception("command /%s failed", command.name)
        answer = f"/{command.name} failed: {type(exc).__name__}: {exc}"
    if isinstance(answer, ModelPrompt):
        return answer.text  # the turn puts it in the history as the user's request
    text_answer = "" if answer is None else str(answer)
    if command.in_history and text_answer:
        turn.session.append_history({"role": "user", "content": text})
    say(turn, text_answer, command.in_history)
    return ""


def say(turn, text, in_history=True):
    """Show ``text`` as the agent's message (recorded for replay; in the model's history
    when ``in_history``)."""
    if not text:
        return
    turn.session.emit(ev.TextChunk(new_id("msg"), text))
    if in_history:
        turn.session.append_history({"role": "assistant", "content": text, "thought": None,
                                     "tool_calls": []})
