"""The live sessions: create, list, resume, fork, delete, close, shut down. The manager
owns the sessions' prompts (``sessions/prompts.py``: :class:`Prompts`) and the sessions
closed but remembered (``sessions/dormant.py``: :class:`DormantSessions`).

Runtime only: it raises domain errors (``SessionNotFound``, ``SessionBusy`` ...) that
``acp/v2/handlers.py`` maps to JSON-RPC errors, and emits plain events through each session's
``sink``.
"""

import contextlib
import logging
import os
import shutil
import time
import uuid

import gevent

from term2acp.core import private, scratch
from term2acp.core.workspace import WorkspaceError, is_utf8, validate_cwd
from term2acp.mcp import session as mcp
from term2acp.sessions import repair, takeover
from term2acp.sessions.dormant import DormantSessions
from term2acp.sessions.errors import (CwdMismatch, SessionClosing, SessionLocked,
                                      SessionNotFound, UnknownMessage)
from term2acp.sessions.live import NO_FACE, LiveSession, SessionLock
from term2acp.sessions.prompts import Prompts
from term2acp.sessions.store import store_for
from term2acp.turns import context
from term2acp.turns.checkpoints import private_dir

log = logging.getLogger(__name__)

PAGE_SIZE = 50


class SessionManager:
    """The live sessions of this process: created, resumed, forked, closed; their prompts
    are its :class:`Prompts`', the ones closed but remembered its :class:`DormantSessions`'.
    The faces ask the manager: what the prompts answer are their bound methods."""

    def __init__(self, settings, catalog, tools, sandbox_note="available", store=None,
                 turns_ready=None):
        self.settings = settings
        self.catalog = catalog
        self.tools = tools  # callable() -> dict name -> Tool (loaded once, lazily)
        self.store = store or store_for(settings)
        self.live = {}
        self._scratch = None
        self._creating = {}  # greenlet -> ids it created inside undo_new_on_failure()
        prompts = self.prompts = Prompts(settings, catalog, tools, self.store, self.live,
                                         self.get, sandbox_note, turns_ready)
        dormant = self.dormant = DormantSessions(settings, self.store, self.live, self._locks,
                                                 self._attach, self._load_history,
                                                 self._release, prompts.cancel)
        self.prompt_read, self.admit, self.steer = prompts.prompt_read, prompts.admit, prompts.steer
        self.prepare, self.start, self.cancel = prompts.prepare, prompts.start, prompts.cancel
        self.mark_closing, self.taken_over_once = prompts.mark_closing, dormant.taken_over_once
        self.yield_requested, self.turns_ready = dormant.yield_requested, prompts.turns_ready
        self.forget_providers = prompts.forget_providers
        self._prepare_dirs()

    def _prepare_dirs(self):
        """The directories every session needs, made now, not in the first session/new (a
        few filesystem round trips fewer there). Failures are left to that call to report."""
        try:
            private.make_dirs(self._locks)
            self._scratch = scratch.make("sessions-")
        except OSError:
            pass

    # ------------------------------------------------------------ plumbing
    @property
    def _locks(self):
        return os.path.join(self.settings.data_dir, "locks")

    def flush(self):
        """Commit everything written so far, the Recorders' journal records included."""
        self.store.commit()

    def _workdir(self, session_id):
        if self._scratch is None:
            self._scratch = scratch.make("sessions-")
        path = os.path.join(self._scratch, session_id)
        private.make_dirs(path)
        return path

    def _attach(self, row, take=False, face=NO_FACE):
        """Make the stored ``row`` live here, opened by ``face`` (its FaceLink). ``take``:
        when another process holds it, ask that process to let it go
        (sessions/takeover.py) instead of refusing."""
        try:
            return self._attach_here(row, face)
        except SessionLocked as exc:
            if not take:
                raise
            log.info("session %s is open in process %s: taking it over", row["id"], exc.args[0])
            return takeover.take(self._locks, row["id"], exc.args[0],
                                 lambda: self._attach_here(row, face))

    def _attach_here(self, row, face):
        self.dormant.make_room()
        lock = SessionLock(self._locks, row["id"])
        lock.acquire()
        try:
            session = LiveSession(row, self.store, lock, self._workdir(row["id"]), face,
                                  self.settings.effort, self.settings.mode)
        except BaseException:
            lock.release()
            raise
        self.live[session.id] = session
        self.dormant.arm_idle_timer()
        return session

    # ------------------------------------------------------------ lifecycle
    def new(self, cwd, face=NO_FACE):
        """session/new in ``cwd`` for ``face`` (its FaceLink, ``sessions/facelink.py``)."""
        root = validate_cwd(cwd)
        provider, model = self.catalog.resolve(self.settings.provider, self.settings.model)
        self.store.open()
        self.dormant.make_room()  # before the row exists: a refused session/new leaves nothing
        session_id = str(uuid.uuid4())
        row = self.store.create_session(session_id, root, provider, model)
        try:
            session = self._attach(row, face=face)
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

    def fork(self, source_id, cwd, message_id=None, face=NO_FACE):
        """session/fork: a new live session in ``cwd`` with the conversation, replay journal
        and config option values of ``source_id`` (live or stored), and no grants, for
        ``face``; ``message_id``: only up to and including that user or agent message
        (:class:`UnknownMessage` when the session has none of that id)."""
        root = validate_cwd(cwd)
        self.dormant.await_release(source_id)
        source = self.live.get(source_id)
        if source is not None:
            source.recorder.flush()  # what it reported so far is what the fork replays
        row = self.store.open().get_session(source_id)
        if row is None:
            raise SessionNotFound(source_id)
        upto = None if message_id is None else (self._fork_point(source_id, message_id),
                                                message_id)
        self.dormant.make_room()
        session_id = str(uuid.uuid4())
        title = f"{row['title']} (fork)" if row.get("title") else None
        self.store.fork_session(source_id, session_id, root, title, upto)
        created = self._creating.get(gevent.getcurrent())
        if created is not None:
            created.append(session_id)  # discarded if the face's answer fails
        try:
            session = self._attach(self.store.get_session(session_id), face=face)
            self._load_history(session)
        except BaseException:
            self.discard(session_id)
            raise
        return session

    def _fork_point(self, source_id, message_id):
        """The history rows up to and including the message ``message_id``."""
        for seq, message in enumerate(self.store.load_history(source_id), 1):
            if isinstance(message, dict) and message.get("message_id") == message_id:
                return seq
        raise UnknownMessage(message_id)

    def delete(self, session_id):
        """session/delete: close it if live here, then remove it and all it left: the
        store's rows (conversation, journal, checkpoints), our snapshot directory, its lock
        file. Raises SessionNotFound for an id the store does not know, SessionLocked when
        another process has it open."""
        self.dormant.await_release(session_id)
        self.dormant.forget(session_id)
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
        self.dormant.await_release(session_id)
        session = self.live.get(session_id)
        if session is None:
            session = self.dormant.reopen(session_id)
        if session is None or session.closed:
            raise SessionNotFound(session_id)
        session.last_used = time.monotonic()
        return session

    def resume(self, session_id, cwd, face=NO_FACE):
        """Attach (or re-attach) a stored session for ``face``; returns ``(session,
        already_live)``. A session live or dormant here keeps the face it was opened with
        (one connection, so one face, per process)."""
        root = validate_cwd(cwd)
        self.dormant.await_release(session_id)
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
        if session_id in self.dormant:
            return self.dormant.reopen(session_id, take=True), False
        session = self._attach(row, take=True, face=face)  # from another process
        self._load_history(session)
        return session, False

    def _load_history(self, session):
        """What the model sees of the stored conversation (from its last compaction), with
        calls a killed process left open closed as failed (in the journal, so replay shows
        them failed, and in the history, so the model gets a result for every call it made:
        providers refuse unanswered tool calls)."""
        try:
            start, tail, cost = self.store.history_tail(session.id, context.MARKER)
            tail, repaired = repair.history(tail)
            if repaired:
                self.store.replace_tail(session.id, start, tail)
            session.history_rows = start - 1 + len(tail)
            context.restore(session, tail)  # from the last compaction on
            session.cost = cost  # priced requests (turns/turn.py)
            for kind, key, payload in repair.journal(self.store.journal_open(session.id)):
                self.store.journal_put(session.id, kind, key, payload)
            self.store.commit()
        except BaseException:
            self._release(session)
            raise

    def journal(self, session, kinds=None, lines=None):
        """Replay records, read a page at a time as they are consumed. Records nesting
        deeper than the wire bound (stored before it existed) are left out: encoding them
        would fail the whole replay. ``lines``: ``(version, head, tail)``, records stored
        with their updates encoded come as bytes, lines ready to send (Store.journal_lines)."""
        session.recorder.flush()
        skipped = 0
        pieces = self.store.journal_lines(session.id, *lines) if lines else \
            self.store.journal_pages(session.id, kinds)
        for piece in pieces:
            if type(piece) is not bytes and piece[1] is None:  # too deep (tails.journal_page)
                skipped += 1
            else:
                yield piece
        if skipped:
            log.warning("session %s: %d replay records nest too deeply and were skipped",
                        session.id, skipped)

    def close(self, session_id, timeout=10.0):
        """Cancel, wait for the turn to settle, release. Returns False if cancelling failed."""
        try:
            self.dormant.await_release(session_id)  # an idle close under way: then closed for good
        except SessionClosing:
            self.dormant.forget(session_id)
            return False
        session = self.live.get(session_id)
        if session is None:
            self.dormant.forget(session_id)  # idle-closed here: now closed for good
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

    def connect_mcp(self, session, configs):
        """The MCP servers the client sent with session/new, resume or load (replacing the
        session's previous ones); they start in the background, this returns at once.
        The store keeps their description (no secrets) for session/list."""
        if configs or session.mcp_servers:
            mcp.connect(session, configs, self.settings.mcp.call_timeout, self.settings.data_dir)
        described = [config.describe() for config in configs or ()]
        if described != session.mcp_stored:  # committed before the answer is written
            self.store.set_mcp_servers(session.id, described)
            session.mcp_stored = described

    def _release(self, session, forget_grants=True):
        with self.dormant.releasing(session.id):  # lookups wait for the end (dormant.py)
            session.lifecycle.close()
            _end_processes(session)
            if session.mcp is not None:
                mcp.close(session)
            if forget_grants:
                session.access.clear()
            close = getattr(session.provider, "close", None)
            if close is not None:
                close()  # its idle connection (a session opened again makes a new one)
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
            mcp.close_all(list(self.live.values()))  # every session's servers, in parallel
        for session in list(self.live.values()):
            try:
                session.group.kill(block=True, timeout=1)
                self._release(session)
            except Exception:  # noqa: BLE001
                log.exception("session %s: close failed during shutdown", session.id)
        self.dormant.stop()
        self.store.close()
        if self._scratch:
            shutil.rmtree(self._scratch, ignore_errors=True)


def _end_processes(session):
    """End the session's background processes (their exits are reported and recorded
    before its journal is flushed), release its sandbox network, stop its language
    servers: the resources the session owns."""
    try:
        session.shell.close()
    except Exception:  # noqa: BLE001 - the session still closes
        log.exception("session %s: ending its background processes failed", session.id)
    try:
        session.language_servers.close()
    except Exception:  # noqa: BLE001 - the session still closes
        log.exception("session %s: stopping its language servers failed", session.id)
