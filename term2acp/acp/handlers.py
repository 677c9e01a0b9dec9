"""What both faces' session handlers share: the session config options (model, effort,
mode), v1 modes, slash commands (``available_commands_update``), plans and sign-in.

:class:`BaseHandlers` is the base of each face's session handlers
(``acp/v2/handlers.py``, ``acp/v1/handlers.py``); ``VERSION`` picks the shapes:

* config options: v1 names the option ``id``, v2 ``configId``; both are ``select``s;
* v1 also has ``modes`` in new/load/resume results, ``session/set_mode`` and
  ``current_mode_update``: the same state as the ``mode`` option (a change of either
  sends both ``config_option_update`` and ``current_mode_update``);
* a command's input is ``{hint}`` in v1, ``{type: "text", hint}`` in v2;
* auth methods: v1 ``id`` (``agent`` has no ``type``), v2 ``methodId`` + ``type``.

Errors: a prompt without a usable key is ACP's auth-required error (-32000, ``data``
``{"authRequired": true, ...}``); a busy session keeps its own -32000 message
("Session is already processing foreground work").
"""

import logging

from term2acp import auth
from term2acp.acp.errors import domain_errors
from term2acp.core import events as ev
from term2acp.core.pacing import breathe, overdue
from term2acp.rpc.errors import AuthRequiredError, BusyError, InvalidParamsError
from term2acp.sessions.config_options import ConfigOptions, InvalidOptionValue
from term2acp.sessions.facelink import FaceLink
from term2acp.turns import commands, filecommands
from term2acp.turns.modes import MODES

log = logging.getLogger(__name__)


# ---------------------------------------------------------------- shapes
def wire_options(options, version):
    key = "id" if version == 1 else "configId"
    out = []
    for option in options:
        values = []
        for value, name, description in option["values"]:
            item = {"value": value, "name": name}
            if description:
                item["description"] = description
            values.append(item)
        out.append({key: option["id"], "name": option["name"],
                    "description": option["description"], "category": option["category"],
                    "type": "select", "currentValue": option["current"], "options": values})
    return out


def modes_state(session):
    return {"currentModeId": session.mode,
            "availableModes": [{"id": m, "name": name, "description": desc}
                               for m, name, desc in MODES]}


def commands_update(version, known=None):
    """The ``available_commands_update`` of ``known`` (``name -> Command``; default: the
    built-ins and plug-ins)."""
    listed = []
    for command in (commands.available() if known is None else known).values():
        item = {"name": command.name, "description": command.description}
        if command.hint:
            item["input"] = {"hint": command.hint} if version == 1 else \
                {"type": "text", "hint": command.hint}
        listed.append(item)
    return {"sessionUpdate": "available_commands_update", "availableCommands": listed}


def plan_update(event, version):
    if version == 1:
        return {"sessionUpdate": "plan", "entries": [dict(e) for e in event.entries]}
    return {"sessionUpdate": "plan_update",
            "plan": {"type": "items", "planId": event.plan_id,
                     "entries": [dict(e) for e in event.entries]}}


def config_updates(event, session_mode, version):
    updates = [{"sessionUpdate": "config_option_update",
                "configOptions": wire_options(event.options, version)}]
    if version == 1 and session_mode is not None:
        updates.append({"sessionUpdate": "current_mode_update", "currentModeId": session_mode})
    return updates


def replay_plan(payload, version):
    return plan_update(ev.PlanUpdated(payload["plan_id"], payload["entries"]), version)


def auth_required(message, catalog):
    return AuthRequiredError(message, data={
        "authRequired": True,
        "methods": [m[1] for m in auth.methods(catalog, False)],
        "hint": "sign in: set the provider's API key variable, or run term2-acp --login"})


# ---------------------------------------------------------------- handlers
class FaceSession:
    """What a face keeps of one session (by its id; never on the session itself): the
    session object its commands were last sent for, that update (None: not yet), and
    ``first`` while the start's first commands update is still to go. A face may add its
    own (v1: the ``SessionView``)."""

    __slots__ = ("session", "commands", "first", "view")

    def __init__(self, view=None):
        self.session = None
        self.commands = None
        self.first = False
        self.view = view


class BaseHandlers:
    """Shared by both faces' handlers, built whole by ``acp/connection.py`` with the
    session manager, the client proxy, the settings and the client's capabilities
    (``acp/capabilities.py``). ``link`` is what the face's sessions need of it (a
    ``sessions/facelink.py`` FaceLink), handed to the manager as it opens each one."""

    VERSION = 2

    def __init__(self, manager, client, settings, capabilities):
        self.manager = manager
        self.client = client
        self.settings = settings
        self.config_options = ConfigOptions(manager.catalog, settings, self._models_listed)
        self.compaction = capabilities.compaction  # compaction_update (else agent messages)
        self.questions = capabilities.elicitation  # the client's elicitation modes
        self._sessions = {}  # session id -> FaceSession
        self.link = self._link(capabilities)

    def _link(self, capabilities):
        """What this face's sessions need of it: its sink and config options."""
        return FaceLink(self._sink, self.config_options)

    def _sink(self, session, event):
        """Every runtime event of this face's sessions (``LiveSession.emit``)."""
        raise NotImplementedError

    def _face_session(self, session_id):
        record = self._sessions.get(session_id)
        if record is None:
            record = self._sessions[session_id] = FaceSession()
        return record

    def _forget(self, session_id):
        """The session was closed or deleted: what the face kept of it goes."""
        self._sessions.pop(session_id, None)

    # ------------------------------------------------------------ route declarations
    def creating(self, handler):
        """session/new's wrapper (the route tables declare it): whatever fails after the
        row was created, no row stays listed."""
        undo = self.manager.undo_new_on_failure

        def new_session(params):
            with undo():
                return handler(params)

        return new_session

    def mark_prompt(self, params):
        """Runs in the reader as session/prompt is read (``Route.mark``): a session/cancel
        read after it (even in the same write, before the prompt's greenlet has run)
        cancels this prompt, which then ends ``cancelled`` instead of running."""
        params["ticket"] = self.manager.prompt_read(params["session_id"])

    def mark_closing(self, params):
        """Runs in the reader as session/close is read (``Route.mark``): the session's turn
        is cancelled before any later line, so an approval answer read after the close
        (even in the same chunk) cannot allow. The close itself runs in its own greenlet."""
        self.manager.mark_closing(params["session_id"])

    # ------------------------------------------------------------ config options, commands
    def _models_listed(self, provider):
        for session in list(self.manager.live.values()):
            if session.provider_id == provider and session.config_options is self.config_options:
                session.emit(ev.ConfigChanged(self.config_options.options(session)))

    def started(self, session, replayed=False):
        """A session started (new/resume/load): its config options, the model listing, and
        the slash commands: after the answer, which is written first, unless the start
        ``replayed`` the conversation (every update of a replay goes before its answer).
        The commands need the plug-in scan (``commands.scanned``: in a thread, the rest
        of the preload, which the session layer waits for, is not awaited here)."""
        record = self._face_session(session.id)
        record.session, record.commands, record.first = session, None, True
        if replayed:
            commands.scanned()
            self._announce_commands(session)
        session.group.spawn(self._after_start, session, replayed)

    def _after_start(self, session, announced=False):
        """After the answer: the slash commands (plug-ins are scanned by then) and the
        background /models listing (its HTTP client imported by then)."""
        self.manager.turns_ready()
        if overdue():  # many sessions waited for the preload (core/pacing.py)
            breathe()
        if not announced:
            self._announce_commands(session)
        self.config_options.list_models(session.provider_id, session.group)

    def _commands_changed(self, session):
        """The session's MCP servers changed its commands (their prompts, a sign-in): told
        unless the start's first commands update is still to go (it will have them)."""
        record = self._sessions.get(session.id)
        if record is None or record.session is not session or not record.first:
            self._announce_commands(session)

    def _announce_commands(self, session):
        """Send the session's slash commands: the first time since its start, and then
        whenever they differ from what it was last sent. Its command files are looked at:
        one ``stat`` each. Nothing goes before the start's first update (a CommandsChanged
        of its MCP servers then: that first list has them)."""
        record = self._face_session(session.id)
        if record.session is not session:  # a session reopened without a start
            record.session, record.commands, record.first = session, None, False
        update = commands_update(self.VERSION, filecommands.listed(session, self.settings,
                                                                        tell=False))
        if record.first or update != record.commands:
            record.first = False
            record.commands = update
            self.client.update(session.id, update)

    def announced(self, session):
        """Before a prompt's first update (the session layer waited for the preload in
        ``admit``): the session's commands update went out first, and again if a command
        file was added, changed or removed since."""
        record = self._sessions.get(session.id)
        if record is not None and record.session is session:
            self._announce_commands(session)

    def setup_result(self, session, result):
        result["configOptions"] = wire_options(self.config_options.options(session), self.VERSION)
        if self.VERSION == 1:
            result["modes"] = modes_state(session)
        return result

    @domain_errors
    def set_config_option(self, params):
        session = self.manager.get(params["session_id"])
        value = params["value"]
        if not isinstance(value, str):
            raise InvalidParamsError(f'"{params["config_id"]}" takes a value id (a string)')
        try:
            self.config_options.set(session, params["config_id"], value)
        except InvalidOptionValue as exc:
            raise InvalidParamsError(str(exc)) from None
        return {"configOptions": wire_options(self.config_options.options(session), self.VERSION)}

    @domain_errors
    def set_mode(self, params):
        session = self.manager.get(params["session_id"])
        try:
            self.config_options.set(session, "mode", params["mode_id"])
        except InvalidOptionValue as exc:
            raise InvalidParamsError(str(exc)) from None
        return {}

    # ------------------------------------------------------------ steering
    @domain_errors
    def steering(self, params):
        """codex-acp's ``_session/steering {sessionId, prompt}``: the prompt joins the
        running turn (``injected``) or, when the session is idle, starts one
        (``startedNewTurn``; a v1 answer comes when that turn has ended); ``failed`` when
        it could do neither (the turn was being cancelled)."""
        if self.manager.steer(params["session_id"], params["prompt"]) is not None:
            return {"outcome": "injected"}
        try:
            self.prompt(dict(params, meta=None))
        except BusyError:
            return {"outcome": "failed"}
        return {"outcome": "startedNewTurn"}

    # ------------------------------------------------------------ sign-in
    def login(self, params):
        catalog = self.manager.catalog
        method_id = params["method_id"]
        known = {m[1] for m in auth.methods(catalog, True)}
        if method_id not in known:
            raise InvalidParamsError(f'unknown authentication method "{method_id}"; the '
                                     f'methods are: {", ".join(sorted(known))}')
        problem = auth.login_check(catalog, self.settings, method_id)
        if problem is not None:
            raise auth_required(problem, catalog)
        self.manager.forget_providers()  # made again with the keys now known
        return {}

    def logout(self, params):
        auth.forget_keys(self.settings)
        self.manager.forget_providers()  # made again with the keys now known
        return {}


def fork_point(meta):
    """The message a ``session/fork`` forks at, where claude-agent-acp and codex-acp read it:
    ``_meta.jetbrains.air.fork = {"version": 1, "messageId": "..."}``; None without one."""
    point = meta
    for key in ("jetbrains", "air", "fork"):
        point = point.get(key) if isinstance(point, dict) else None
    if point is None:
        return None
    if not isinstance(point, dict) or point.get("version") != 1:
        raise InvalidParamsError('_meta.jetbrains.air.fork must be {"version": 1, '
                                 '"messageId": "<a message id>"}')
    message_id = point.get("messageId")
    if not isinstance(message_id, str) or not message_id:
        raise InvalidParamsError("_meta.jetbrains.air.fork.messageId must be the id of a user "
                                 "or agent message of the session")
    return message_id


def steered(params):
    """A ``session/prompt`` marked ``_meta.steering: true``."""
    meta = params.get("meta")
    return isinstance(meta, dict) and meta.get("steering") is True


STEERING_META = {"steering": {"supported": True}}  # initialize's _meta, both versions


def shared_updates(session, event, version):
    """The updates both faces build alike (a config option change, a plan), or None."""
    kind = type(event)
    if kind is ev.ConfigChanged:
        return config_updates(event, session.mode, version)
    if kind is ev.PlanUpdated:
        return [plan_update(event, version)]
    return None
