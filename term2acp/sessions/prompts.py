"""A session's prompts: read, admitted, prepared, run as a turn, settled, cancelled.

:class:`Prompts`, owned by ``SessionManager`` (``sessions/manager.py``), drives each
prompt through its session's lifecycle (``sessions/lifecycle.py``): the reader
marks a prompt read (:meth:`~Prompts.prompt_read`) so a cancel read right after it is
not lost; the face's handler admits, prepares and starts it; the turn greenlet runs the
turn (``turns/turn.py``) and settles its outcome, the one idle update.
"""

import logging
import time

from term2acp.core import events as ev
from term2acp.core.cancel import TurnCancelled
from term2acp.core.ids import new_id
from term2acp.core.pacing import breathe, overdue
from term2acp.mcp import session as mcp
from term2acp.providers.catalog import NO_PROVIDER_HELP
from term2acp.providers.errors import ProviderError, ProviderNotConfigured
from term2acp.sessions.errors import SessionBusy, StoreError
from term2acp.sessions.lifecycle import CANCELLED, FAILED, Outcome
from term2acp.turns import content, failures, modes, projectmcp, skills, steering
from term2acp.turns.agents import kinds
from term2acp.turns.agents.tool import NAME as AGENT, AgentTool
from term2acp.turns.prompt import system_prompt, title_from
from term2acp.turns.titles import request_model_title
from term2acp.turns.turn import Turn

log = logging.getLogger(__name__)


class PromptTicket:
    """A session/prompt read by the reader and not yet admitted (see prompt_read)."""

    __slots__ = ("cancelled",)

    def __init__(self):
        self.cancelled = False


class Prompts:
    """The prompts of the manager's live sessions; its own state is the tickets of prompts
    read and not yet admitted."""

    def __init__(self, settings, catalog, tools, store, live, lookup, sandbox_note,
                 turns_ready=None):
        self.settings = settings
        self.catalog = catalog
        self.tools = tools  # callable() -> dict name -> Tool
        self.store = store
        self._live = live  # the manager's live sessions: id -> LiveSession (read only)
        self._lookup = lookup  # id -> the session, reopened if dormant (SessionManager.get)
        self._sandbox_note = sandbox_note  # the shell sandbox's state (or a callable saying it)
        self._read_prompts = {}  # session id -> tickets of prompts read, not yet admitted
        self._turns_ready = turns_ready  # () -> once the preload is done (preload.py)

    def turns_ready(self):
        """Wait (cooperatively, bounded) until what only turns need is prepared: the tools,
        the providers' HTTP client, the command plug-ins (``term2acp/preload.py``). A
        prompt's ``admit`` waits first; so does a face before a session's first commands."""
        if self._turns_ready is not None:
            self._turns_ready()

    def forget_providers(self):
        """A sign-in changed the keys: live sessions without a running turn make their
        provider again at their next prompt."""
        for session in list(self._live.values()):
            if not session.busy:
                session.provider = None

    def prompt_read(self, session_id):
        """A session/prompt was read (runs in the reader, before the next line): returns
        its ticket for :meth:`admit`. A session/cancel read before the prompt is admitted
        (the two lines arrived together) marks the ticket, so it cancels that prompt
        instead of being lost. Tickets of prompts never admitted (their request was
        cancelled before it ran) are dropped past a small bound."""
        ticket = PromptTicket()
        tickets = self._read_prompts.setdefault(session_id, [])
        tickets.append(ticket)
        del tickets[:-8]
        return ticket

    def _take_ticket(self, session_id, ticket):
        """The read prompt ``ticket`` is handled now: True when a cancel was read first."""
        if ticket is None:
            return False
        tickets = self._read_prompts.get(session_id, ())
        if ticket in tickets:
            tickets.remove(ticket)
            if not tickets:
                del self._read_prompts[session_id]
        return ticket.cancelled

    def admit(self, session_id, ticket=None):
        """Reserve the foreground slot (the first thing a prompt does): idle -> preparing,
        once what turns need is prepared (a cancel read meanwhile is kept by the ticket)."""
        self.turns_ready()
        cancelled = self._take_ticket(session_id, ticket)
        session = self._live.get(session_id)
        if session is not None and session.busy:
            raise SessionBusy(session_id)
        session = self._lookup(session_id)
        session.lifecycle.admit(cancelled)
        return session

    def steer(self, session_id, blocks, ticket=None):
        """A steering prompt: when the session's turn runs (and is not being cancelled) it
        joins that turn before its next model request (``turns/steering.py``); returns the
        running prompt's AsyncResult of its Outcome, or None when it did not join (the
        session is idle: the caller starts a turn with it)."""
        session = self._lookup(session_id)
        lifecycle = session.lifecycle
        if not session.busy or lifecycle.stopping:
            return None
        content.validate(blocks)
        text = content.to_model(blocks, session.root, images=session.images,
                                model=session.model)
        self._take_ticket(session_id, ticket)
        steering.queue(session, new_id("user"), blocks, text)
        return lifecycle.ended

    def prepare(self, session, blocks):
        """Validate content and the provider; on failure the slot is released."""
        try:
            content.validate(blocks)  # before the provider: a bad prompt is -32602 anyway
            if session.provider is None:
                provider_id, model = session.provider_id, session.model
                if provider_id is None:
                    provider_id, model = self.catalog.resolve(self.settings.provider,
                                                              self.settings.model)
                if provider_id is None:
                    raise ProviderNotConfigured(NO_PROVIDER_HELP)
                session.provider = self.catalog.create(provider_id)
                session.provider_id, session.model = provider_id, model
                info = self.catalog.info(provider_id, model)
                session.context_window = info.context_window
                if info.reasoning is False:  # e.g. gpt-4.1 rejects a reasoning effort
                    session.effort = "default"
            images = session.images = bool(self.catalog.info(session.provider_id,
                                                             session.model).images)
            return content.to_model(blocks, session.root, images=images, model=session.model)
        except BaseException:
            session.lifecycle.abandon()
            raise

    def start(self, session, blocks, text, gate):
        """preparing -> running: spawn the turn (it emits the user message first, after
        the face's acknowledgement). Returns the AsyncResult of the turn's Outcome."""
        def spawn():
            greenlet = session.group.spawn(self._run_turn, session, blocks, text)
            greenlet.name = f"turn-{session.id}"
            return greenlet

        return session.lifecycle.start(spawn, gate)

    def _run_turn(self, session, blocks, text):
        outcome, turn = Outcome(CANCELLED), None
        try:
            if overdue():  # many prompts let go at once (core/pacing.py)
                breathe()
            if not session.lifecycle.begin():
                return  # cancelled before it began
            self._tell_earlier_loss(session)
            title = None
            if not session.title:
                title = session.title = title_from(content.user_words(blocks)) or None
                session.title_words = title and content.user_words(blocks)  # for the model
            stamp = self.store.touch(session.id, title)
            session.prompt_message_id = new_id("user")  # the turn's id for checkpoints
            session.emit(ev.UserMessage(session.prompt_message_id, blocks))
            session.emit(ev.SessionInfoChanged(title=title, updated_at=stamp))
            # A mode's own tools (plan mode's finish_plan) only in that mode: the request's
            # tool budget (mcp/offer.py) and the prompt's list count what is offered.
            tools = modes.offered_tools(session.mode, self.tools())
            tools[AGENT] = AgentTool(kinds.discover(session.root, self.settings.config_path))
            if skills.refresh(session, self.settings, tell=False).found:  # a note lists them
                tools["skill"] = skills.SkillTool(session.skills)
            turn = Turn(session, session.provider, tools, self.settings, "")
            projectmcp.refresh(turn)  # the workspace's .mcp.json (asked about first)
            if session.mcp_servers:  # waits (bounded) for handshakes, tells failures once
                tools = mcp.turn_tools(session, tools, new_id,
                                       call_timeout=self.settings.mcp.call_timeout,
                                       settings=self.settings.mcp)
            note = self._sandbox_note
            session.sandbox_note = note() if callable(note) else note  # a context note
            turn.tools = tools
            turn.system = system_prompt(tools, getattr(session.provider, "brief_prompt", False),
                                        session.root, session.sandbox_note)
            outcome = Outcome(turn.run(text))
        except TurnCancelled:  # also TurnAborted (a stale or cancelled approval)
            outcome = Outcome(CANCELLED)
        except ProviderError as exc:
            log.error("session %s: model provider failed: %s", session.id, exc)
            outcome = Outcome(FAILED, str(exc)[:500], told=self._tell(session, exc))
        except StoreError as exc:  # disk full, locked by another process: said as it is
            log.error("session %s: the session store failed: %s", session.id, exc)
            outcome = Outcome(FAILED, f"session store: {str(exc)[:480]}",
                              told=self._tell(session, exc))
        except Exception as exc:  # noqa: BLE001 - a turn never takes the agent down
            log.exception("session %s: turn failed", session.id)
            outcome = Outcome(FAILED, f"internal error ({type(exc).__name__})",
                              told=self._tell(session, exc))
        finally:
            self._settle(session, turn, outcome)

    def _tell_earlier_loss(self, session):
        """A store failure that lost the end of an earlier turn (its last updates, written
        while the store was still full or locked) is told once, here, and this prompt goes
        on: the store works again, and failing this turn for the old loss would fail every
        next prompt too."""

        lost = self.store.take_lost(session.id)
        if lost is not None:
            log.warning("session %s: earlier changes were not saved: %s", session.id, lost)
            session.emit(ev.Notice(new_id("msg"), (
                f"Note: some changes of the previous turn could not be saved ({lost}); the "
                "saved session lacks them. The store works again.\n\n")))

    def _tell(self, session, exc):
        """What a failed turn means and what to do (the Outcome's ``told``): said as an
        agent message too (besides the stop reason), unless the face says it as the
        prompt's error (v1: its FaceLink's ``failures_as_errors``)."""
        told = None
        try:
            provider = getattr(session.provider, "name", None) or session.provider_id
            told = failures.explain(exc, provider)
            if not session.face.failures_as_errors:
                session.emit(ev.Notice(new_id("msg"), failures.message(exc, provider)))
        except Exception:  # noqa: BLE001 - the stop reason still carries the error
            log.exception("session %s: could not report the failure", session.id)
        return told

    def _settle(self, session, turn, outcome):
        checkpoint, session.checkpoint = session.checkpoint, None
        try:
            if checkpoint is not None:
                checkpoint.finish()
        except Exception:  # noqa: BLE001 - /undo then says what the turn left is unknown
            log.exception("session %s: could not finish the turn's checkpoint", session.id)
        words, session.title_words = session.title_words, None
        if words and checkpoint is not None and outcome.reason != FAILED:
            request_model_title(session, words, self.settings)  # off the next prompt's path
        try:
            if turn is not None:
                if turn.tokens is not None:
                    outcome = outcome._replace(usage=dict(zip(
                        ("input", "output", "thought", "cached", "cache_write"), turn.tokens)))
                if self.settings.report_runs:  # exec's result (headless/)
                    outcome = outcome._replace(run={"requests": turn.requests,
                                                    "cost": round(turn.cost, 8)})
                turn.close_open_calls("cancelled" if outcome.reason == CANCELLED else "failed")
                session.cost += turn.cost
                session.recording.outcome(session.prompt_message_id, outcome.reason,
                                          outcome.error)
            stamp = self.store.touch(session.id)
            session.emit(ev.SessionInfoChanged(updated_at=stamp))
        except Exception:  # noqa: BLE001
            log.exception("session %s: could not record the end of the turn", session.id)
        finally:
            session.last_used = time.monotonic()
            session.lifecycle.finish(outcome)  # -> idle, the one idle update
            session.recorder.forget_finished()

    def cancel(self, session_id):
        """session/cancel (runs in the reader): the prompt admitted last, or one read and
        not yet admitted, ends ``cancelled`` (sessions/lifecycle.py decides the rest)."""
        for ticket in self._read_prompts.get(session_id, ()):
            ticket.cancelled = True  # prompts read before this cancel, not yet admitted
        session = self._live.get(session_id)
        if session is not None:
            session.lifecycle.cancel()

    def mark_closing(self, session_id):
        """session/close was read: from now on the session's turn is cancelled (runs in the
        reader, before any later line, so an answer read after the close cannot allow)."""
        self.cancel(session_id)
