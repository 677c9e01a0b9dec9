"""Session lifecycle: create, list, resume, admit prompts, run turns, cancel, close.

What only prompts (and resume/load) need (the turn loop, compaction, content,
instructions, MCP) is imported where it is used: session/new does not wait for it (the
warm-up imports it off the hub, term2acp/warmup.py, and those calls wait for that).

Runtime only: it raises domain errors (``SessionNotFound``, ``SessionBusy`` ...) that
``acp/v2/handlers.py`` maps to JSON-RPC errors, and emits plain events through each session's
``sink``.
"""

import contextlib
import logging
import os
import shutil
import sys
import time
import uuid

import gevent

from term2acp.core import events as ev
from term2acp.core import scratch
from term2acp.core.cancel import TurnCancelled
from term2acp.core.ids import new_id
from term2acp.core.nesting import too_deep
from term2acp.providers.catalog import NO_PROVIDER_HELP
from term2acp.providers.errors import ProviderError, ProviderNotConfigured
from term2acp.sessions import repair, takeover
from term2acp.sessions.errors import (CwdMismatch, SessionBusy, SessionLimit, SessionLocked,
                                      SessionNotFound, StoreError)
from term2acp.sessions.lifecycle import CANCELLED, FAILED, Outcome
from term2acp.sessions.live import LiveSession, SessionLock
from term2acp.sessions.store import store_for
from term2acp.core.workspace import WorkspaceError, is_utf8, validate_cwd

log = logging.getLogger(__name__)

PAGE_SIZE = 50
MAX_DORMANT = 4096  # idle-closed sessions remembered for a transparent reopen
TAKEN_OVER = ("This session was opened in another term2-acp process (pid {pid}) and is closed "
              "here. To continue in this window, load or resume it here again (that takes it "
              "back).")
DORMANT_STATE = ("sink", "access", "effort", "provider_id", "model", "context_window", "cost",
                 "title", "interaction_seq", "mode", "config_options", "window_learned",
                 "mcp_servers", "editor")


class PromptTicket:
    """A session/prompt read by the reader and not yet admitted (see prompt_read)."""

    __slots__ = ("cancelled",)

    def __init__(self):
        self.cancelled = False


class SessionManager:
    def __init__(self, settings, catalog, tools, sandbox_note="available", store=None):
        self.settings = settings
        self.catalog = catalog
        self.tools = tools  # callable() -> dict name -> Tool (loaded once, lazily)
        self.sandbox_note = sandbox_note
        # ``store``: already opened off the hub (term2acp/warmup.py), else opened on first use
        self.store = store or store_for(settings)
        self.live = {}
        self._scratch = None
        self._idle_timer = None
        self._dormant = {}  # session id -> state of a session idle-closed by this process
        self._creating = {}  # greenlet -> ids it created inside undo_new_on_failure()
        self._read_prompts = {}  # session id -> tickets of prompts read, not yet admitted
        self._prepare_dirs()

    def _prepare_dirs(self):
        """The directories every session needs, made now (the face is built before the
        first session call arrives), not in the first session/new: a few filesystem
        round trips fewer there (issue 16). Failures are left to that call to report."""
        try:
            os.makedirs(self._locks, mode=0o700, exist_ok=True)
            self._scratch = scratch.make("sessions-")
        except OSError:
            pass

    # ------------------------------------------------------------ plumbing
    @property
    def _locks(self):
        return os.path.join(self.settings.data_dir, "locks")

    def _note(self):
        note = self.sandbox_note
        return note() if callable(note) else note

    def flush(self):
        """Commit everything written so far, the Recorders' journal records included."""
        self.store.commit()

    def _workdir(self, session_id):
        if self._scratch is None:
            self._scratch = scratch.make("sessions-")
        path = os.path.join(self._scratch, session_id)
        os.makedirs(path, mode=0o700, exist_ok=True)
        return path

    def _attach(self, row, take=False):
        """Make the stored ``row`` live here. ``take``: when another process holds it, ask
        that process to let it go (sessions/takeover.py) instead of refusing."""
        try:
            return self._attach_here(row)
        except SessionLocked as exc:
            if not take:
                raise
            log.info("session %s is open in process %s: taking it over", row["id"], exc.args[0])
            return takeover.take(self._locks, row["id"], exc.args[0],
                                 lambda: self._attach_here(row))

    def _attach_here(self, row):
        self._make_room()
        lock = SessionLock(self._locks, row["id"])
        lock.acquire()
        try:
            session = LiveSession(row, self.store, lock, self._workdir(row["id"]))
        except BaseException:
            lock.release()
            raise
        session.effort = row.get("effort") or self.settings.effort  # a stored choice wins
        session.mode = row.get("mode") or getattr(self.settings, "mode", "auto")
        session.mcp_stored = row.get("mcp_servers") or []  # what the store says (describe())
        self.live[session.id] = session
        self._arm_idle_timer()
        return session

    # ------------------------------------------------------------ live-session budget
    def _make_room(self):
        """At the cap, idle-close sessions idle past the timeout; else refuse clearly."""
        cap = self.settings.max_live_sessions
        if len(self.live) < cap:
            return
        self._close_idle()
        if len(self.live) >= cap:
            raise SessionLimit(cap)

    def _arm_idle_timer(self):
        if self._idle_timer is None and self.settings.idle_session_timeout:
            period = max(0.05, min(60.0, self.settings.idle_session_timeout / 4))
            self._idle_timer = gevent.spawn_later(period, self._idle_tick)
            self._idle_timer.name = "idle-sessions"

    def _idle_tick(self):
        self._idle_timer = None
        try:
            self._close_idle()
        except Exception:  # noqa: BLE001
            log.exception("closing idle sessions failed")
        if self.live:
            self._arm_idle_timer()

    def _close_idle(self):
        """Close sessions with no turn that were not used for ``idle_session_timeout``; they
        reopen transparently on their next prompt, resume or close (see ``_reopen``)."""
        timeout = self.settings.idle_session_timeout
        if not timeout:
            return
        horizon = time.monotonic() - timeout
        for session in list(self.live.values()):
            if _keeps_processes(session):
                continue  # its background processes live until it closes for good
            if not session.busy and not session.closed and session.last_used < horizon:
                log.info("session %s idle for %ds: closed (reopens on next use)",
                         session.id, timeout)
                self._dormant[session.id] = {k: getattr(session, k) for k in DORMANT_STATE}
                while len(self._dormant) > MAX_DORMANT:
                    self._dormant.pop(next(iter(self._dormant)))
                session.group.kill(block=False)
                self._release(session, forget_grants=False)

    def _reopen(self, session_id, take=False):
        """A session idle-closed (or taken over from) this process, attached again as it
        was; or None."""
        state = self._dormant.get(session_id)
        if state is None:
            return None
        row = self.store.open().get_session(session_id)
        if row is None:
            self._dormant.pop(session_id, None)
            return None
        session = self._attach(row, take)  # SessionLocked if another process has it now
        del self._dormant[session_id]
        for key, value in state.items():
            setattr(session, key, value)
        self._load_history(session)
        return session

    # ------------------------------------------------------------ lifecycle
    def new(self, cwd):
        root = validate_cwd(cwd)
        provider, model = self.catalog.resolve(self.settings.provider, self.settings.model)
        self.store.open()
        self._make_room()  # before the row exists: a refused session/new leaves nothing
        session_id = str(uuid.uuid4())
        row = self.store.create_session(session_id, root, provider, model)
        try:
            session = self._attach(row)
        except BaseException:
            self.discard(session_id)
            raise
        created = self._creating.get(gevent.getcurrent())
        if created is not None:
            created.append(session_id)
        return session

    @contextlib.contextmanager
    def undo_new_on_failure(self):
        """Sessions created inside this block are discarded if the block fails (the
        front end's session/new does more after :meth:`new`, and may fail)."""
        me = gevent.getcurrent()
        self._creating[me] = created = []
        try:
            yield
        except BaseException:
            for session_id in created:
                self.discard(session_id)
            raise
        finally:
            self._creating.pop(me, None)

    def discard(self, session_id):
        """Undo a session/new that failed after the row was created: no row stays listed."""
        session = self.live.get(session_id)
        try:
            if session is not None:
                self._release(session)
        finally:
            try:
                self.store.delete_session(session_id)
            except Exception:  # noqa: BLE001 - the original failure is what the client hears
                log.exception("could not remove the failed session %s", session_id)

    def fork(self, source_id, cwd):
        """session/fork: a new live session in ``cwd`` with the conversation, replay journal
        and config option values of ``source_id`` (live or stored), and no grants."""
        root = validate_cwd(cwd)
        source = self.live.get(source_id)
        if source is not None:
            source.recorder.flush()  # what it reported so far is what the fork replays
        row = self.store.open().get_session(source_id)
        if row is None:
            raise SessionNotFound(source_id)
        self._make_room()
        session_id = str(uuid.uuid4())
        title = f"{row['title']} (fork)" if row.get("title") else None
        self.store.fork_session(source_id, session_id, root, title)
        created = self._creating.get(gevent.getcurrent())
        if created is not None:
            created.append(session_id)  # discarded if the face's answer fails
        try:
            session = self._attach(self.store.get_session(session_id))
            self._load_history(session)
        except BaseException:
            self.discard(session_id)
            raise
        return session

    def delete(self, session_id):
        """session/delete: close it if live here, then remove it and all it left: the
        store's rows (conversation, journal, checkpoints), our snapshot directory, its lock
        file. Raises SessionNotFound for an id the store does not know, SessionLocked when
        another process has it open."""
        from term2acp.turns.checkpoints import private_dir

        self._dormant.pop(session_id, None)
        if self.store.open().get_session(session_id) is None and session_id not in self.live:
            raise SessionNotFound(session_id)
        if session_id in self.live:
            self.close(session_id)
        lock = SessionLock(self._locks, session_id)
        lock.acquire()  # SessionLocked when another process has it live
        try:
            self.store.delete_session(session_id)
            shutil.rmtree(private_dir(self.settings, session_id), ignore_errors=True)
            with contextlib.suppress(OSError):
                os.unlink(lock.path)
        finally:
            lock.release()

    def list(self, cwd=None, cursor=None):
        if cwd is not None:
            if not os.path.isabs(cwd):
                raise WorkspaceError("cwd must be an absolute path")
            try:
                cwd = os.path.realpath(cwd, strict=True)
            except (OSError, ValueError):
                return [], None  # a directory that does not exist has no sessions
            if not is_utf8(cwd):
                return [], None  # nor one whose name is not UTF-8 (session/new refuses it)
        return self.store.open().list_sessions(cwd, cursor, PAGE_SIZE)

    def get(self, session_id):
        session = self.live.get(session_id)
        if session is None:
            session = self._reopen(session_id)
        if session is None or session.closed:
            raise SessionNotFound(session_id)
        session.last_used = time.monotonic()
        return session

    def resume(self, session_id, cwd):
        """Attach (or re-attach) a stored session; returns ``(session, already_live)``."""
        root = validate_cwd(cwd)
        session = self.live.get(session_id)
        if session is not None:
            if session.root != root:
                raise CwdMismatch("cwd does not match the live session workspace")
            session.last_used = time.monotonic()
            return session, True
        row = self.store.open().get_session(session_id)
        if row is None:
            raise SessionNotFound(session_id)
        if row["cwd"] != root:
            raise CwdMismatch(f"cwd does not match the session's workspace {row['cwd']}")
        if session_id in self._dormant:
            return self._reopen(session_id, take=True), False
        session = self._attach(row, take=True)  # from another process that has it open
        self._load_history(session)
        return session, False

    def _load_history(self, session):
        """The stored conversation, with calls a killed process left open closed as failed
        (in the journal, so replay shows them failed, and in the history, so the model
        gets a result for every call it made: providers refuse unanswered tool calls)."""
        from term2acp.turns import context

        try:
            history, repaired = repair.history(self.store.load_history(session.id))
            if repaired:
                self.store.replace_history(session.id, history)
            session.history_rows = len(history)
            context.restore(session, history)  # from the last compaction on
            session.cost = sum(m["cost"] for m in history  # priced requests (turns/turn.py)
                               if isinstance(m, dict) and isinstance(m.get("cost"), (int, float)))
            for kind, key, payload in repair.journal(self.store.journal(
                    session.id, ("tool_call", "terminal"))):
                self.store.journal_put(session.id, kind, key, payload)
            self.store.commit()
        except BaseException:
            self._release(session)
            raise

    def journal(self, session):
        """Replay records. Records nesting deeper than the wire bound (stored before it
        existed) are left out: encoding them would fail the whole replay."""
        session.recorder.flush()
        records = self.store.journal(session.id)
        kept = [(kind, payload) for kind, payload in records if not too_deep(payload)]
        if len(kept) != len(records):
            log.warning("session %s: %d replay records nest too deeply and were skipped",
                        session.id, len(records) - len(kept))
        return kept

    # ------------------------------------------------------------ prompts
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

    def admit(self, session_id, ticket=None):
        """Reserve the foreground slot (the first thing a prompt does): idle -> preparing."""
        cancelled = False
        if ticket is not None:
            tickets = self._read_prompts.get(session_id, ())
            if ticket in tickets:
                tickets.remove(ticket)
                if not tickets:
                    del self._read_prompts[session_id]
            cancelled = ticket.cancelled
        session = self.live.get(session_id)
        if session is not None and session.busy:
            raise SessionBusy(session_id)
        session = self.get(session_id)
        session.lifecycle.admit(cancelled)
        return session

    def prepare(self, session, blocks):
        """Validate content and the provider; on failure the slot is released."""
        from term2acp.turns import content

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
        from term2acp.turns import content
        from term2acp.turns.prompt import system_prompt, title_from
        from term2acp.turns.turn import Turn
        from term2acp.mcp import session as mcp

        outcome, turn = Outcome(CANCELLED), None
        try:
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
            tools = {name: tool for name, tool in self.tools().items()
                     if getattr(tool, "modes", None) is None or session.mode in tool.modes}
            if session.mcp_servers:  # waits (bounded) for handshakes, tells failures once
                tools = mcp.turn_tools(session, tools, new_id,
                                       call_timeout=self.settings.mcp.call_timeout,
                                       settings=self.settings.mcp)
            session.sandbox_note = self._note()  # a context note (turns/notes.py)
            turn = Turn(session, session.provider, tools, self.settings,
                        system_prompt(tools, getattr(session.provider, "brief_prompt", False),
                                      session.root, session.sandbox_note))
            outcome = Outcome(turn.run(text))
        except TurnCancelled:  # also TurnAborted (a stale or cancelled approval)
            outcome = Outcome(CANCELLED)
        except ProviderError as exc:
            log.error("session %s: model provider failed: %s", session.id, exc)
            outcome = Outcome(FAILED, str(exc)[:500])
            self._tell(session, exc)
        except StoreError as exc:  # disk full, locked by another process: said as it is
            log.error("session %s: the session store failed: %s", session.id, exc)
            outcome = Outcome(FAILED, f"session store: {str(exc)[:480]}")
            self._tell(session, exc)
        except Exception as exc:  # noqa: BLE001 - a turn never takes the agent down
            log.exception("session %s: turn failed", session.id)
            outcome = Outcome(FAILED, f"internal error ({type(exc).__name__})")
            self._tell(session, exc)
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
        """A failed turn says why as an agent message (besides the stop reason)."""
        from term2acp.turns import failures

        try:
            session.emit(ev.Notice(new_id("msg"), failures.message(exc)))
        except Exception:  # noqa: BLE001 - the stop reason still carries the error
            log.exception("session %s: could not report the failure", session.id)

    def _settle(self, session, turn, outcome):
        checkpoint, session.checkpoint = session.checkpoint, None
        try:
            if checkpoint is not None:
                checkpoint.finish()
        except Exception:  # noqa: BLE001 - /undo then says what the turn left is unknown
            log.exception("session %s: could not finish the turn's checkpoint", session.id)
        words, session.title_words = getattr(session, "title_words", None), None
        if words and checkpoint is not None and outcome.reason != FAILED:
            from term2acp.turns.titles import request_model_title

            request_model_title(session, words, self.settings)  # off the next prompt's path
        try:
            if turn is not None:
                if turn.tokens is not None:
                    outcome = Outcome(outcome.reason, outcome.error, dict(zip(
                        ("input", "output", "thought", "cached", "cache_write"), turn.tokens)))
                turn.close_open_calls("cancelled" if outcome.reason == CANCELLED else "failed")
                session.cost += turn.cost
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
        session = self.live.get(session_id)
        if session is not None:
            session.lifecycle.cancel()

    def close(self, session_id, timeout=10.0):
        """Cancel, wait for the turn to settle, release. Returns False if cancelling failed."""
        session = self.live.get(session_id)
        if session is None:
            self._dormant.pop(session_id, None)  # idle-closed here: now closed for good
            return True
        ok = True
        turn = session.lifecycle.greenlet
        try:
            self.cancel(session_id)
        except Exception:  # noqa: BLE001
            log.exception("session %s: cancel failed", session_id)
            ok = False
        if turn is not None:
            turn.join(timeout)
            if not turn.dead:
                ok = False
                turn.kill(block=True, timeout=1)
        session.group.kill(block=True, timeout=1)
        self._release(session)
        return ok

    def yield_requested(self):
        """Let go of every live session another process asked for (its SIGUSR2)."""
        for session in list(self.live.values()):
            requester = takeover.requested(self._locks, session.id)
            if requester is not None and requester != os.getpid():
                try:
                    self._yield(session, requester)
                except Exception:  # noqa: BLE001 - the requester then hears it is locked
                    log.exception("session %s: could not let it go", session.id)

    def _yield(self, session, requester):
        """Close ``session`` here for another process: its client is told why (not in the
        journal, which the new holder replays), a running turn is cancelled, and the
        session stays known here, so using it again says where it is."""

        log.warning("session %s: taken over by term2-acp process %s", session.id, requester)
        if session.sink is not None:
            session.sink(session, ev.Notice(new_id("msg"), TAKEN_OVER.format(pid=requester)))
        state = {key: getattr(session, key) for key in DORMANT_STATE}
        turn = session.lifecycle.greenlet
        self.cancel(session.id)
        if turn is not None:
            turn.join(self.settings.shutdown_timeout)
        session.group.kill(block=True, timeout=1)
        self._release(session, forget_grants=False)
        self._dormant[session.id] = state
        while len(self._dormant) > MAX_DORMANT:
            self._dormant.pop(next(iter(self._dormant)))

    def mark_closing(self, session_id):
        """session/close was read: from now on the session's turn is cancelled (runs in the
        reader, before any later line, so an answer read after the close cannot allow)."""
        self.cancel(session_id)

    def connect_mcp(self, session, configs):
        """The MCP servers the client sent with session/new, resume or load (replacing the
        session's previous ones); they start in the background, this returns at once.
        The store keeps their description (no secrets) for session/list."""
        if configs or session.mcp_servers:
            from term2acp.mcp import session as mcp

            mcp.connect(session, configs, self.settings.mcp.call_timeout)
        described = [config.describe() for config in configs or ()]
        if described != session.mcp_stored:  # committed before the answer is written
            self.store.set_mcp_servers(session.id, described)
            session.mcp_stored = described

    def _release(self, session, forget_grants=True):
        session.lifecycle.close()
        _end_processes(session)
        if session.mcp is not None:
            from term2acp.mcp import session as mcp

            mcp.close(session)
        if forget_grants:
            session.access.clear()
        self.live.pop(session.id, None)
        try:
            session.recorder.flush()
            self.store.commit()
        finally:
            session.lock.release()
            shutil.rmtree(session.workdir, ignore_errors=True)

    def shutdown(self, timeout):
        """Cancel every turn, then close every session, all within ``timeout``."""
        deadline = gevent.Timeout(timeout)
        deadline.start()
        try:
            for session_id in list(self.live):
                self.cancel(session_id)
            turns = [s.lifecycle.greenlet for s in self.live.values()
                     if s.lifecycle.greenlet is not None]
            gevent.joinall(turns, timeout=timeout)
        except gevent.Timeout:
            log.warning("shutdown deadline reached while cancelling turns")
        finally:
            deadline.close()
        if any(s.mcp is not None for s in self.live.values()):
            from term2acp.mcp import session as mcp

            mcp.close_all(list(self.live.values()))  # every session's servers, in parallel
        for session in list(self.live.values()):
            try:
                session.group.kill(block=True, timeout=1)
                self._release(session)
            except Exception:  # noqa: BLE001
                log.exception("session %s: close failed during shutdown", session.id)
        if self._idle_timer is not None:
            self._idle_timer.kill(block=False)
        self.store.close()
        if self._scratch:
            shutil.rmtree(self._scratch, ignore_errors=True)
        scratch.cleanup()  # the process's whole scratch folder (core/scratch.py)


def _keeps_processes(session):
    """Whether background processes of the session's shell are running (an idle close
    would end them, so it waits)."""
    processes = sys.modules.get("term2acp.tools.processes")  # never used: none running
    return processes is not None and processes.running(session.id) > 0


def _end_processes(session):
    """End the session's background processes (their exits are reported and recorded
    before its journal is flushed) and release its sandbox network."""
    processes = sys.modules.get("term2acp.tools.processes")
    if processes is not None:
        try:
            processes.close_session(session.id)
        except Exception:  # noqa: BLE001 - the session still closes
            log.exception("session %s: ending its background processes failed", session.id)
