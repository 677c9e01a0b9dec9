"""The shape every tool has.

A tool declares a marshmallow ``Params`` schema (which also yields the model-facing JSON
schema), a description for the model, an ACP ``kind``, an approval check and ``run``.
``run`` returns a :class:`ToolResult` or raises :class:`ToolError`; errors are values for
the model, never protocol errors. Tools run in the turn's tool greenlet: blocking code is
fine (gevent makes it cooperative) and cancellation arrives as a ``GreenletExit``
subclass, so ``except Exception`` in a tool cannot swallow it.

The approval check, ``approval(args, ctx)``, returns one of:

* ``None``: the call needs nobody; the turn calls ``run(args, ctx)``;
* an ``core.approvals.ApprovalRequest``: the user is asked first; ``run(args, ctx)``
  runs only after an allow;
* a :class:`Plan`: what the check found (its ``request``, None or an ApprovalRequest, the
  resolved target, the locations to report, whatever else ``run`` needs, e.g. the old and
  new text of an edit). The turn reports the plan's ``locations`` (no separate
  ``locations()`` call), asks when ``plan.request`` is set, and then calls
  ``run(args, ctx, plan)``: the plan ``run`` gets is the one that was checked and, if it
  asked, allowed. ``run`` still checks the target again at the time of use.

The first two are the plug-in API (``tools/plugins.py``, MCP tools); the built-in file tools
return plans so one call resolves its path once, reads a file once and builds its diff once.
"""

import weakref
from dataclasses import dataclass, field
from typing import Any

from marshmallow import EXCLUDE, Schema, ValidationError, fields, validate

from term2acp.core.elicitation import DECLINE, NOT_SUPPORTED, Elicited

# Params class -> the one schema instance that loads its arguments. Schemas hold no
# per-load state, so one instance serves every call of every tool using that class.
_loaders = weakref.WeakKeyDictionary()


class ToolError(Exception):
    """A failed tool call. The message is written for the model: say what to do instead."""


class EditorError(ToolError):
    """The editor could not read or write a file for us; the call fails, nothing falls back."""


def editor_of(session):
    """The editor's file access of ``session`` (``session.editor``, made of the FaceLink of
    the protocol face that opened it: the v1 face's ``fs/*`` methods), or None: then all
    tool I/O is local. An editor
    object has ``can_read``, ``can_write``, ``read_text(path) -> str`` and
    ``write_text(path, text)``; the last two raise EditorError."""
    return session.editor


@dataclass
class Plan:
    """What a tool's approval check found, handed to its ``run(args, ctx, plan)``.

    Tools add what their ``run`` needs (``tools/edit.py`` subclasses it with the old and new
    text and the diff).
    """

    request: Any = None  # core.approvals.ApprovalRequest, or None: nobody is asked
    target: str | None = None  # the canonical target the check resolved
    locations: list | None = None  # what the call reports; None: the tool's locations()


@dataclass
class ToolResult:
    text: str  # what the model sees
    is_error: bool = False
    # Display items for the editor, runtime-neutral (acp/v2/translate.py maps them):
    #   {"type": "text", "text": str}
    #   {"type": "diff", "path": abs, "old": str | None, "new": str | None}
    #   {"type": "terminal", "terminal_id": str}
    #   {"type": "link", "uri": str, "name": str}  (a web page: turns/websearch.py)
    content: list = field(default_factory=list)
    raw_output: Any = None
    locations: list | None = None  # [{"path": abs, "line": int}] to replace the initial ones
    end_turn: bool = False  # the turn ends after this call's round (plan mode's "keep planning")
    cost: float | None = None  # USD a sub-agent spent (kept with the result in the history)


class ToolContext:
    """What a running tool may use, built whole by the turn for each call (every field is a
    constructor argument; what a context is not given is None, or empty)."""

    __slots__ = ("root", "extra_roots", "session_id", "call_id", "access", "settings", "emit",
                 "workdir", "editor", "mode", "images", "checkpoint", "watch", "choose",
                 "trust", "decide", "abort", "set_mode", "agents", "shell", "language_servers",
                 "_approve", "_run_tool", "_elicits", "_elicit")

    def __init__(self, root, session_id, call_id, access, settings, emit, approve=None,
                 run_tool=None, workdir=None, editor=None, *, extra_roots=(), mode=None,
                 images=False, checkpoint=None, watch=None, choose=None, trust=None,
                 decide=None, abort=None, set_mode=None, elicits=None, elicit=None,
                 agents=None, shell=None, language_servers=None):
        self.root = root  # canonical session root (relative paths resolve against it)
        self.extra_roots = extra_roots  # the session's other roots (additionalDirectories)
        self.session_id = session_id
        self.call_id = call_id
        self.access = access  # sessions.access.AccessState
        self.settings = settings  # settings.Settings
        self.emit = emit  # callable(runtime event), e.g. terminal output
        self.workdir = workdir  # per-session scratch directory (private /tmp for the sandbox)
        # The editor's file access for this session, or None (then all I/O is local): an
        # object with ``can_read``, ``can_write``, ``read_text(path) -> str`` and
        # ``write_text(path, text)``; the last two raise EditorError.
        self.editor = editor
        self.mode = mode  # the session's mode, normalized (turns/modes.py; tools/shell_policy.py)
        self.images = images  # the editor takes images: read_file may return them
        self.checkpoint = checkpoint  # callable(path): the turn's checkpoint (turns/checkpoints.py)
        self.watch = watch  # callable(path): the call's language server watch (lsp/diagnostics.py)
        # callable(ApprovalRequest) -> the choice id allowed, or None (the turn's)
        self.choose = choose
        # callable(path, content, purpose="") -> True when the user trusts that content of a
        # file the workspace supplies (core/trust.py; asked as part of this call); None: never
        self.trust = trust
        self.decide = decide  # callable(ApprovalRequest) -> the Decision (core/approvals.py)
        self.abort = abort  # callable(reason): end the turn as cancelled, from inside a tool
        self.set_mode = set_mode  # callable(mode id): switch the session's mode, reported
        self.agents = agents  # the turn that may start sub-agents (the agent tool); None: not
        # The session's shell (tools/shell_state.py: its loopback and background processes)
        # and its language servers (lsp/registry.py), owned by the session; None: none here.
        self.shell = shell
        self.language_servers = language_servers
        self._approve = approve
        self._run_tool = run_tool
        self._elicits = elicits  # callable(mode) -> bool
        self._elicit = elicit  # callable(question) -> Elicited

    def before_write(self, real):
        """``real`` (canonical) is about to be written, replaced or removed: the turn's
        checkpoint records what it is now (so /undo can put it back). Every tool that
        changes a file calls this first; the shared write paths (``write_atomically``,
        ``tools/editor_io.py``) do."""
        if self.checkpoint is not None:
            self.checkpoint(real)
        if self.watch is not None:
            self.watch(real)

    def elicits(self, mode):
        """The editor takes questions of ``mode`` (``core/elicitation.py``: FORM, URL)."""
        return self._elicits is not None and self._elicits(mode)

    def elicit(self, question):
        """Ask the user ``question`` (``core.elicitation.Elicitation``) through the editor;
        returns an ``Elicited`` (accept with content, decline or cancel; never raises but a
        cancelled turn's exit)."""
        if self._elicit is None:
            return Elicited(DECLINE, reason=NOT_SUPPORTED)
        return self._elicit(question)

    def approve(self, request):
        """Ask the client (through the session's gate); returns True only on an allow. A
        denial that ends the turn is raised instead, as a ``GreenletExit``
        (``core.cancel.TurnAborted``) that ``except Exception`` does not catch."""
        if self._approve is None:
            return False
        return self._approve(request)

    def run_tool(self, name, arguments):
        """Run another tool as a nested, separately reported call (used by run_code)."""
        if self._run_tool is None:
            raise ToolError("nested tool calls are not available here")
        return self._run_tool(name, arguments)


def identity(st):
    """What says a file was not replaced or changed since ``st`` was taken (None: absent)."""
    return None if st is None else (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def changed_since_read(shown):
    return (f"{shown} changed after it was read for this call (the diff shown is no longer "
            "what would be written); nothing was written. Read it again and call the tool "
            "again.")


class Tool:
    name = ""
    description = ""
    kind = "other"  # ACP ToolKind: read, edit, delete, move, search, execute, think, fetch, other
    # True: every file the tool changes goes through ``ToolContext.before_write`` first (the
    # file tools). Otherwise a tool of a changing kind is snapshotted around (checkpoints).
    records_writes = False
    modes = None  # the session modes the tool is offered in (turns/modes.py); None: all
    Params = Schema
    # A quiet tool is shown by the updates it emits itself (update_plan: the plan update);
    # its call appears in the editor only when it fails. Clients such as agent-shell draw
    # a call whose input holds a plan as one more copy of the plan.
    quiet = False

    @property
    def beside_others(self):
        """Whether a call of this tool may run beside the other calls of its model round
        (``turns/rounds.py``'s gate). A tool that changes files (kind edit, delete, move)
        runs alone: after every earlier call, before any later one. Override to say so."""
        return self.kind not in ("edit", "delete", "move")

    def title(self, args):
        return self.name

    def title_in(self, args, ctx):
        """The title of a call in its session (a background process's calls name its
        command); ``title(args)`` unless the tool knows better."""
        return self.title(args)

    def locations(self, args, ctx):
        return []

    def approval(self, args, ctx):
        """None, an ``core.approvals.ApprovalRequest`` when the call needs a human, or a
        :class:`Plan` (then the turn calls ``run(args, ctx, plan)``; module docstring)."""
        return None

    def preview(self, args, ctx, plan):
        """The display items (diffs) a question about this call shows when the tool's own
        check did not ask but the mode does (ask mode): what the call would change. May
        raise ToolError: nobody is asked to approve a change that would fail."""
        return []

    def run(self, args, ctx):
        raise NotImplementedError

    def load(self, arguments):
        """Validate raw model arguments; raises ToolError with the field messages."""
        if not isinstance(arguments, dict):
            raise ToolError(f"{self.name} arguments must be a JSON object")
        loader = _loaders.get(self.Params)
        if loader is None:
            loader = _loaders[self.Params] = self.Params(unknown=EXCLUDE)
        try:
            return loader.load(arguments)
        except ValidationError as exc:
            raise ToolError(f"invalid arguments for {self.name}: {exc.normalized_messages()}") from None

    def spec(self):
        """The model-facing tool description (shared between calls: do not modify it).

        Built once per instance and rebuilt only if ``name``, ``description`` or ``Params``
        change, since every model round asks every tool for it.
        """
        key = (self.name, self.description, self.Params)
        cached = self.__dict__.get("_cached_spec")
        if cached is None or cached[0] != key:
            spec = {"name": self.name, "description": self.description,
                    "parameters": json_schema(self.Params())}
            cached = self._cached_spec = (key, spec)
        return cached[1]


_TYPES = (
    (fields.Boolean, "boolean"),
    (fields.Integer, "integer"),
    (fields.Number, "number"),
    (fields.String, "string"),
    (fields.List, "array"),
    (fields.Dict, "object"),
    (fields.Nested, "object"),
)


def json_schema(schema):
    """A JSON Schema object for a marshmallow schema instance (the subset tools use)."""
    props, required = {}, []
    for name, fld in schema.fields.items():
        if fld.dump_only:
            continue
        key = fld.data_key or name
        props[key] = _field_schema(fld)
        if fld.required:
            required.append(key)
    out = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        out["required"] = required
    return out


def _field_schema(fld):
    if isinstance(fld, fields.Nested):
        nested = fld.schema
        out = json_schema(nested)
        if getattr(fld, "many", False):
            out = {"type": "array", "items": out}
    elif isinstance(fld, fields.List):
        out = {"type": "array", "items": _field_schema(fld.inner)}
    else:
        out = {}
        for klass, name in _TYPES:
            if isinstance(fld, klass):
                out["type"] = name
                break
    for validator in getattr(fld, "validators", ()):
        if isinstance(validator, validate.OneOf):
            out["enum"] = list(validator.choices)
        elif isinstance(validator, validate.Range):
            if validator.min is not None:
                out["minimum"] = validator.min
            if validator.max is not None:
                out["maximum"] = validator.max
    description = fld.metadata.get("description")
    if description:
        out["description"] = description
    return out
