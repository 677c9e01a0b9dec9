"""A session's config options: model, reasoning effort and mode.

Runtime only. :class:`ConfigOptions` describes them as plain dicts (``acp/handlers.py``
gives them each protocol version's shape) and applies a change: it validates the value,
updates the live session, persists the value with the session (so resume restores it) and reports
:class:`~term2acp.core.events.ConfigChanged`.

* ``model`` lists the models of the session's provider: the catalog, the config file, and
  what the provider's models endpoint lists (OpenAI and compatible servers ``/models``,
  Anthropic ``/v1/models``; fetched in the background with a timeout through the
  provider's own HTTP client, once per provider and process, never on the path of
  ``session/new``; a failure keeps the catalog's list). Any other id is accepted too: the
  provider says whether it serves it. A change applies from the next model request.
* ``effort`` lists only what the chosen model supports; a model change resets it to a value
  the new model supports.
* ``mode``: ``read-only``, ``plan``, ``ask`` or ``auto`` (see ``turns/modes.py``).
"""

import logging

import gevent

from term2acp.core import events as ev
from term2acp.providers.catalog import CatalogError
from term2acp.settings import EFFORTS
from term2acp.core.ids import new_id
from term2acp.turns.modes import MODES, PLAN, READ_ONLY

log = logging.getLogger(__name__)

LIST_TIMEOUT = 10.0  # seconds a /models listing may take
REASONING_EFFORTS = ("default", "low", "medium", "high")
GPT5_EFFORTS = ("default", "minimal", "low", "medium", "high")


class InvalidOptionValue(ValueError):
    """A value the option does not offer; the message lists the values it does."""


def efforts_for(info):
    """The efforts a model supports (``info``: the catalog's ModelInfo)."""
    reasoning = info.reasoning
    if isinstance(reasoning, (list, tuple)):
        values = ["default"] + [e for e in reasoning if e in EFFORTS and e != "default"]
        return tuple(values)
    if reasoning is True:
        return GPT5_EFFORTS if info.id.startswith("gpt-5") else REASONING_EFFORTS
    if reasoning is False:
        return ("default",)
    return EFFORTS  # unknown model (a server's own id): every effort, the server decides


class ConfigOptions:
    def __init__(self, catalog, settings, on_listed=None):
        self.catalog = catalog
        self.settings = settings
        self.listed = {}  # provider id -> model ids its server listed
        self._listing = {}  # provider id -> greenlet fetching its /models
        self.on_listed = on_listed  # callable(provider id) when a listing added models

    # ------------------------------------------------------------ describing
    def models(self, session):
        provider = session.provider_id
        ids = [m.id for m in self.catalog.models if m.provider == provider]
        if session.model and session.model not in ids:
            ids.insert(0, session.model)
        for model in self.listed.get(provider, ()):
            if model not in ids:
                ids.append(model)
        return ids

    def efforts(self, session):
        if not session.provider_id:
            return ("default",)
        return efforts_for(self.catalog.info(session.provider_id, session.model))

    def options(self, session):
        """The session's options, runtime-neutral: id, name, category, current, values."""
        options = []
        if session.provider_id and session.model:
            options.append({
                "id": "model", "name": "Model", "category": "model",
                "description": f"Model of the {session.provider_id} provider",
                "current": session.model,
                "values": [(m, m, None) for m in self.models(session)]})
            options.append({
                "id": "effort", "name": "Reasoning effort", "category": "thought_level",
                "description": "How much the model reasons before answering",
                "current": session.effort if session.effort in self.efforts(session) else "default",
                "values": [(e, e, None) for e in self.efforts(session)]})
        options.append({
            "id": "mode", "name": "Mode", "category": "mode",
            "description": "What the agent may do without asking",
            "current": session.mode,
            "values": [(m, name, desc) for m, name, desc in MODES]})
        return options

    # ------------------------------------------------------------ changing
    def set(self, session, option, value):
        """Apply one value; returns True when something changed."""
        if option == "model":
            changed = self.set_model(session, value)
        elif option == "effort":
            changed = self.set_effort(session, value)
        elif option == "mode":
            changed = self.set_mode(session, value)
        else:
            known = ", ".join(o["id"] for o in self.options(session))
            raise InvalidOptionValue(f'unknown config option "{option}"; the options are: {known}')
        if changed:
            self.persist(session)
            session.emit(ev.ConfigChanged(self.options(session)))
        return changed

    def set_mode(self, session, mode):
        ids = [m[0] for m in MODES]
        if mode not in ids:
            raise InvalidOptionValue(f'unknown mode "{mode}"; the modes are: {", ".join(ids)}')
        changed = session.mode != mode
        session.mode = mode
        if changed:
            hold_processes(session)
        return changed

    def set_effort(self, session, effort):
        allowed = self.efforts(session)
        if effort not in allowed:
            raise InvalidOptionValue(f'effort "{effort}" is not supported by {session.model}; '
                                f'choose one of: {", ".join(allowed)}')
        changed = session.effort != effort
        session.effort = effort
        return changed

    def set_model(self, session, model):
        """A model of the active provider (listed, or any id on an OpenAI-compatible
        server), else one the catalog resolves (``<provider>/<model>`` included)."""
        if not isinstance(model, str) or not model.strip():
            raise InvalidOptionValue("the model id must be a non-empty string")
        provider = session.provider_id
        if provider and (model in self.models(session) or self.catalog.passthrough(provider)):
            target = (provider, model)
        else:
            try:
                target = self.catalog.resolve(None, model)
            except CatalogError as exc:
                raise InvalidOptionValue(str(exc)) from None
        if target == (session.provider_id, session.model):
            return False
        if target[0] != session.provider_id:
            session.provider = None  # created again for the new provider at the next prompt
        session.provider_id, session.model = target
        info = self.catalog.info(*target)
        session.context_window = info.context_window
        if session.effort not in efforts_for(info):
            session.effort = "default"
        self.list_models(session.provider_id, session.group)
        return True

    def persist(self, session):
        session.store.set_option_values(session.id, session.provider_id, session.model,
                                  session.effort, session.mode)
        session.store.commit()

    # ------------------------------------------------------------ /models
    def list_models(self, provider, group=None):
        """Start fetching ``provider``'s ``/models`` once (OpenAI-compatible servers only),
        in ``group`` (the session's: closing it ends the fetch, and a later session of the
        provider starts it again)."""
        if not provider or provider in self._listing or not self._lists_models(provider):
            return
        greenlet = (group.spawn if group is not None else gevent.spawn)(self._fetch, provider)
        greenlet.name = f"models-{provider}"
        self._listing[provider] = greenlet

    def _lists_models(self, provider):
        if provider in ("openai", "anthropic", "gemini", "azure", "bedrock", "vertex"):
            return True
        cfg = self.catalog.custom.get(provider)
        return bool(cfg) and bool(cfg.get("base_url"))

    def _fetch(self, provider):
        try:
            self._fetch_once(provider)
        except gevent.GreenletExit:
            self._listing.pop(provider, None)  # its session closed: the next one retries
            raise

    def _fetch_once(self, provider):
        try:
            instance = self.catalog.create(provider)
            lister = getattr(instance, "list_models", None)
            if lister is None:
                return
            with gevent.Timeout(LIST_TIMEOUT):
                ids = lister(LIST_TIMEOUT)
        except gevent.Timeout:
            log.info("%s: listing models took longer than %ss; using the catalog", provider,
                     LIST_TIMEOUT)
            return
        except Exception as exc:  # noqa: BLE001 - the catalog's list still works
            log.info("%s: could not list models (%s); using the catalog", provider, exc)
            return
        fresh = [m for m in ids if isinstance(m, str) and m][:500]
        if fresh and fresh != self.listed.get(provider):
            self.listed[provider] = fresh
            if self.on_listed is not None:
                self.on_listed(provider)


def hold_processes(session):
    """Read-only and plan change nothing, so the session's background processes stop
    (whole trees, ``SessionShell.freeze``) while it is in one of them, and continue when
    it leaves; the user is told either way."""
    held = session.held_processes
    if session.mode in (READ_ONLY, PLAN) and held is None:
        running = session.shell.running()
        if not running:
            return
        session.held_processes = session.shell.freeze()
        text = (f"Paused this session's {_count(running)} ({session.mode} mode changes "
                "nothing); they continue when you switch to ask or auto.")
    elif session.mode not in (READ_ONLY, PLAN) and held is not None:
        session.held_processes = None
        held.thaw()
        text = f"The session's background processes continue ({session.mode} mode)."
    else:
        return
    session.emit(ev.Notice(new_id("msg"), text))


def _count(running):
    return "background process" if running == 1 else f"{running} background processes"

