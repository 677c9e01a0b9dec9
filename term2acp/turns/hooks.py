"""Hooks with Claude Code's semantics: commands the user configured that see the session's
events and may add context, block or decide.

Events: ``SessionStart`` (before the session's first prompt in this process; ``source``
``startup`` or ``resume``), ``UserPromptSubmit`` (``prompt``), ``PreToolUse``
(``tool_name``, ``tool_input``), ``PostToolUse`` (and ``tool_response``), ``Stop``
(``stop_hook_active``). Every event also has ``session_id``, ``cwd`` and
``hook_event_name``. Where from: ``[[hooks.<Event>]]`` of ``config.toml`` (``matcher``,
``hooks = [{ type = "command", command = "...", timeout = 5 }]``), then the workspace's
``.claude/settings.json`` ``hooks`` in the same shape, used once the user trusts that file's
content (``core/trust.py``).

A hook is ``/bin/sh -c <command>`` run as configured (unsandboxed, like an MCP server the
user set up) in the session's folder, ``CLAUDE_PROJECT_DIR`` set to it, the event's JSON on
its stdin. Its answer: exit code 2 blocks (stderr is the reason); exit 0 with JSON on
stdout: ``decision: "block"`` + ``reason``, ``hookSpecificOutput.permissionDecision``
(``allow``/``deny``/``ask``, ``permissionDecisionReason``), ``additionalContext``
(``hookSpecificOutput``'s or top-level); plain stdout of ``SessionStart`` and
``UserPromptSubmit`` is context too. Any other exit code, a timeout (default 60 s: the
process group is killed) or a start failure is logged and ignored. ``matcher`` (tool
events) is a regular expression matched against our tool names; empty or ``*``: all.
"""

import json
import logging
import os
import re
import tempfile


from marshmallow import ValidationError

from term2acp.config import HOOKS
from term2acp.core import events as ev
from term2acp.core.ids import new_id
from term2acp.turns import sources, trusting

log = logging.getLogger(__name__)

EVENTS = HOOKS.EVENTS
TOOL_EVENTS = ("PreToolUse", "PostToolUse")
DEFAULT_TIMEOUT = 60.0
OUTPUT_CAP = 64 * 1024  # bytes of a hook's stdout and of its stderr that count
CONTEXT_CAP = 16_000  # characters of one hook's context given to the model
PROJECT_FILE = (".claude", "settings.json")


class Hook:
    __slots__ = ("event", "matcher", "command", "timeout", "origin")

    def __init__(self, event, matcher, command, timeout, origin):
        self.event, self.matcher, self.command = event, matcher or "", command
        self.timeout, self.origin = timeout or DEFAULT_TIMEOUT, origin

    def matches(self, tool_name):
        if self.event not in TOOL_EVENTS or self.matcher in ("", "*"):
            return True
        try:
            return re.fullmatch(self.matcher, tool_name or "") is not None
        except re.error:
            return self.matcher == tool_name


class Answer:
    """What the hooks of one event said, together."""

    def __init__(self):
        self.blocked = False  # exit 2 or decision "block"
        self.reason = ""
        self.permission = None  # "allow" / "deny" / "ask" (PreToolUse)
        self.context = []  # additionalContext (and plain stdout where it counts)


def hooks_of(table, origin):
    """``[Hook]`` of a hooks table in Claude's shape (checked by ``config.py``'s schema)."""
    out = []
    for event in EVENTS:
        for group in table.get(event) or ():
            for item in group.get("hooks") or ():
                if item.get("type", "command") == "command" and item.get("command"):
                    out.append(Hook(event, group.get("matcher"), item["command"],
                                    item.get("timeout"), origin))
    return out


def project_table(data):
    """The hooks of a workspace's ``.claude/settings.json`` (events we do not know, and
    hooks that are not commands, left out), checked; raises ValueError."""
    loaded = json.loads(data.decode("utf-8"))
    table = loaded.get("hooks") if isinstance(loaded, dict) else None
    if not isinstance(table, dict):
        return {}
    known = {event: [dict(group, hooks=[h for h in group.get("hooks") or ()
                                        if isinstance(h, dict) and h.get("type") == "command"])
                     for group in groups if isinstance(group, dict)]
             for event, groups in table.items() if event in EVENTS and isinstance(groups, list)}
    try:
        return HOOKS.deserialize(known)
    except ValidationError as exc:
        raise ValueError(exc.messages) from None


class Hooks:
    """One session's hooks: the config file's, and its workspace's once trusted."""

    def __init__(self, session, settings):
        self.session, self.settings = session, settings
        self.configured = hooks_of(settings.hooks, "config.toml")
        self.path = os.path.join(session.root, *PROJECT_FILE)
        self._seen = None  # (size, mtime) of the project file last looked at
        self._project = []  # its hooks, once trusted
        self.started = False  # SessionStart ran in this process

    def refresh(self, turn):
        """Look at the workspace's file (a stat; read and asked about when it changed)."""
        try:
            info = os.stat(self.path)
            signature = (info.st_size, info.st_mtime_ns, info.st_ino)
        except OSError:
            signature = None
        if signature == self._seen:
            return
        self._seen, self._project = signature, []
        if signature is None:
            return
        data = sources.read(self.path)
        try:
            table = project_table(data) if data is not None else {}
        except ValueError as exc:
            self._say(f"Ignored the hooks of {self.path}: {exc}")
            return
        if table and trusting.decide(turn, self.path, data, "hooks"):
            self._project = hooks_of(table, self.path)

    def _say(self, text):
        self.session.emit(ev.ThoughtChunk(new_id("thought"), text))

    def of(self, event, tool_name=None):
        return [hook for hook in self.configured + self._project
                if hook.event == event and hook.matches(tool_name)]

    def fire(self, event, tool_name=None, **fields):
        """Run the hooks of ``event`` (one after another); their :class:`Answer`."""
        answer = Answer()
        hooks = self.of(event, tool_name)
        if not hooks:
            return answer
        payload = {"session_id": self.session.id, "cwd": self.session.root,
                   "hook_event_name": event, **fields}
        if tool_name is not None:
            payload["tool_name"] = tool_name
        data = json.dumps(payload, ensure_ascii=False, default=str).encode()
        for hook in hooks:
            outcome = run(hook, data, self.session.root, self.settings)
            if outcome is not None:
                read_answer(answer, event, *outcome)
        return answer


def read_answer(answer, event, code, out, err):
    """Fold one hook's exit code, stdout and stderr into ``answer``."""
    out = out.decode("utf-8", "replace").strip()
    err = err.decode("utf-8", "replace").strip()
    if code == 2:
        answer.blocked = True
        answer.reason = answer.reason or err or "blocked by a hook"
        if event == "PreToolUse":
            answer.permission = "deny"
        return
    if code != 0:
        log.warning("a %s hook exited with %s (ignored; %d bytes on stderr, not logged: "
                    "they may hold secrets)", event, code, len(err))
        return
    fields = None
    if out.startswith("{"):
        try:
            fields = json.loads(out)
        except ValueError:
            fields = None
    if not isinstance(fields, dict):
        if out and event in ("SessionStart", "UserPromptSubmit"):
            answer.context.append(out[:CONTEXT_CAP])
        return
    specific = fields.get("hookSpecificOutput")
    specific = specific if isinstance(specific, dict) else {}
    context = specific.get("additionalContext") or fields.get("additionalContext")
    if isinstance(context, str) and context.strip():
        answer.context.append(context.strip()[:CONTEXT_CAP])
    if fields.get("decision") == "block":
        answer.blocked = True
        answer.reason = answer.reason or str(fields.get("reason") or "blocked by a hook")
    decision = specific.get("permissionDecision") or \
        {"block": "deny", "approve": "allow"}.get(fields.get("decision"))  # the older names
    if event == "PreToolUse" and decision in ("allow", "deny", "ask"):
        rank = {"allow": 0, "ask": 1, "deny": 2}  # the strictest of several hooks wins
        if answer.permission is None or rank[decision] > rank[answer.permission]:
            answer.permission = decision
            why = specific.get("permissionDecisionReason") or fields.get("reason")
            if isinstance(why, str) and why.strip():
                answer.reason = why.strip()


def run(hook, data, cwd, settings):
    """``(exit code, stdout, stderr)`` of one hook, or None (failed or timed out: logged)."""
    from term2acp.sandbox import process  # with sh: only sessions with hooks

    env = dict(settings.env or os.environ)
    env.update(CLAUDE_PROJECT_DIR=cwd)  # as Claude Code sets it
    out = bytearray()

    def keep(chunk):
        if len(out) < OUTPUT_CAP:
            out.extend(chunk[:OUTPUT_CAP - len(out)])
    # stderr goes to a file of its own (the launch helper joins stdout and stderr)
    with tempfile.TemporaryFile() as errors:
        try:
            child = process.start(["/bin/sh", "-c", hook.command], cwd=cwd, env=env,
                                  on_output=keep, stdin=process.PIPE,
                                  enter=lambda: os.dup2(errors.fileno(), 2))
        except process.LaunchError as exc:
            log.warning("a %s hook of %s could not start (ignored): %s", hook.event,
                        hook.origin, exc)
            return None
        try:
            try:
                child.write(data)
            except process.InputClosed:
                pass  # it does not read its input
            child.close_input()
            if child.wait(hook.timeout) is None:
                log.warning("a %s hook of %s ran past its timeout of %gs and was killed "
                            "(ignored): %s", hook.event, hook.origin, hook.timeout,
                            hook.command[:200])
                return None
        finally:
            child.kill()
        errors.seek(0)
        return child.exit.exit_code, bytes(out), errors.read(OUTPUT_CAP)


# ---------------------------------------------------------------- the turn's steps
def of(turn):
    """The session's :class:`Hooks`, its workspace file looked at (once a prompt)."""
    session = turn.session
    hooks = session.hooks
    if hooks is None or hooks.path != os.path.join(session.root, *PROJECT_FILE):
        hooks = session.hooks = Hooks(session, turn.settings)
    hooks.refresh(turn)
    return hooks


def context_message(event, texts):
    """A user message with the context hooks gave the model."""
    return {"role": "user", "content": f"<context>\n{event} hook context:\n"
                                       + "\n\n".join(texts) + "\n</context>"}


def at_prompt(turn, text):
    """Before a prompt reaches the model: ``SessionStart`` (the first time in this process)
    and ``UserPromptSubmit``. Returns ``(reason it is blocked or None, context messages)``."""
    hooks = turn.session.hooks
    messages = []
    if not hooks.started:
        hooks.started = True
        source = "resume" if any(m.get("role") == "assistant" for m in turn.session.history) \
            else "startup"
        said = hooks.fire("SessionStart", source=source)
        if said.context:
            messages.append(context_message("SessionStart", said.context))
    said = hooks.fire("UserPromptSubmit", prompt=str(text))
    if said.blocked:
        return said.reason, messages
    if said.context:
        messages.append(context_message("UserPromptSubmit", said.context))
    return None, messages


def before_tool(session, name, tool_input):
    """``PreToolUse``: its :class:`Answer` (``permission``, ``reason``), or None."""
    hooks = session.hooks
    if hooks is None or not hooks.of("PreToolUse", name):
        return None
    return hooks.fire("PreToolUse", name, tool_input=tool_input)


def after_tool(session, name, tool_input, result):
    """``PostToolUse``: what the hooks add to the result the model sees ("" for nothing)."""
    hooks = session.hooks
    if hooks is None or not hooks.of("PostToolUse", name):
        return ""
    said = hooks.fire("PostToolUse", name, tool_input=tool_input,
                      tool_response={"output": result.text, "is_error": result.is_error})
    parts = list(said.context)
    if said.blocked:
        parts.insert(0, f"A PostToolUse hook says: {said.reason}")
    return "\n\n".join(parts)


def at_stop(turn, active):
    """``Stop``: the reason to go on (a hook blocked the stop), or None."""
    hooks = turn.session.hooks
    if hooks is None or not hooks.of("Stop"):
        return None
    said = hooks.fire("Stop", stop_hook_active=active)
    return said.reason if said.blocked else None
