"""Sessions closed here but remembered: idle-closed at the live-session cap or after
``idle_session_timeout``, or let go to another process that asked for them (its SIGUSR2,
``sessions/takeover.py``). Their state stays in memory, so the next prompt, resume or
close reopens them as they were (:meth:`~DormantSessions.reopen`).

``SessionManager`` (``sessions/manager.py``) owns one :class:`DormantSessions`.
"""

import contextlib
import logging
import os
import time

import gevent
from gevent.event import AsyncResult

from term2acp.core import events as ev
from term2acp.core.ids import new_id
from term2acp.sessions import takeover
from term2acp.sessions.errors import SessionClosing, SessionLimit

log = logging.getLogger(__name__)

MAX_DORMANT = 4096  # idle-closed sessions remembered for a transparent reopen
TAKEN_OVER = ("This session was opened in another term2-acp process (pid {pid}) and is closed "
              "here. To continue in this window, load or resume it here again (that takes it "
              "back).")
# What a dormant session keeps besides its face (its FaceLink: the session is made with it
# again, its config options and editor access with it).
DORMANT_STATE = ("access", "effort", "provider_id", "model", "context_window", "cost",
                 "title", "interaction_seq", "mode", "window_learned", "mcp_servers",
                 "extra_roots")


class DormantSessions:
    """The manager's sessions closed here but remembered, the releases under way, the idle
    timer. What it does to a live session goes through the manager's steps it is given."""

    def __init__(self, settings, store, live, locks, attach, load_history, release, cancel):
        self.settings = settings
        self.store = store
        self.live = live  # the manager's live sessions: id -> LiveSession
        self._locks = locks  # the folder of the sessions' lock files
        self._attach = attach  # (row, take, face) -> a LiveSession (SessionManager._attach)
        self._load_history = load_history  # (session) -> None, released on failure
        self._release = release  # (session, forget_grants) -> None
        self._cancel = cancel  # (session id) -> None: its prompt is cancelled
        self._states = {}  # session id -> state of a session idle-closed by this process
        self._releasing = {}  # session id -> AsyncResult(ok) of its release under way
        self._taken = {}  # session id -> the pid that took it over, until a prompt was told
        self._idle_timer = None

    def __contains__(self, session_id):
        return session_id in self._states

    def forget(self, session_id):
        """Closed for good (or deleted): not reopened any more."""
        self._states.pop(session_id, None)

    def stop(self):
        """No more idle closes (shutdown)."""
        if self._idle_timer is not None:
            self._idle_timer.kill(block=False)

    def make_room(self):
        """At the cap, idle-close sessions idle past the timeout; else refuse clearly."""
        cap = self.settings.max_live_sessions
        if len(self.live) < cap:
            return
        self._close_idle()
        if len(self.live) >= cap:
            raise SessionLimit(cap)

    def arm_idle_timer(self):
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
            self.arm_idle_timer()

    def _close_idle(self):
        """Close sessions with no turn that were not used for ``idle_session_timeout``; they
        reopen transparently on their next prompt, resume or close (see :meth:`reopen`)."""
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
                self._remember(session.id, _state(session))
                session.group.kill(block=False)
                self._release(session, forget_grants=False)

    def _remember(self, session_id, state):
        self._states[session_id] = state
        while len(self._states) > MAX_DORMANT:
            self._states.pop(next(iter(self._states)))

    @contextlib.contextmanager
    def releasing(self, session_id):
        """Around the manager's release: until it ends the session is neither live nor
        dormant, and :meth:`await_release` makes a lookup wait for the end."""
        ended = self._releasing[session_id] = AsyncResult()
        ok = False
        try:
            yield
            ok = True
        finally:
            ended.set(ok)  # False: waiting lookups fail closed (SessionClosing)
            if self._releasing.get(session_id) is ended:
                del self._releasing[session_id]

    def await_release(self, session_id):
        """A session being released here (idle-closed, let go, closed) is neither live nor
        dormant for a moment (its servers stop, the store commits): wait for the end,
        cooperatively and bounded, so the caller then finds it dormant (and reopens it) or
        gone. Fails closed: SessionClosing when the release failed or did not end in time."""
        ended = self._releasing.get(session_id)
        if ended is None:
            return
        timeout = self.settings.shutdown_timeout
        try:
            ok = ended.get(timeout=timeout)
        except gevent.Timeout:
            raise SessionClosing(session_id, f"its close did not end within {timeout:g}s") from None
        if not ok:
            raise SessionClosing(session_id, "its close failed (see the log)")

    def reopen(self, session_id, take=False):
        """A session idle-closed (or taken over from) this process, attached again as it
        was; or None."""
        state = self._states.get(session_id)
        if state is None:
            return None
        row = self.store.open().get_session(session_id)
        if row is None:
            self._states.pop(session_id, None)
            return None
        session = self._attach(row, take, state["face"])  # SessionLocked if another
        # process has it now
        del self._states[session_id]
        self._taken.pop(session_id, None)
        for key in DORMANT_STATE:
            setattr(session, key, state[key])
        self._load_history(session)
        return session

    def taken_over_once(self, session_id):
        """The first prompt here after another process took the session over is answered
        with what happened and what to do (a readable answer, not an error), once: the
        text, or None (later prompts get the error)."""
        pid = self._taken.pop(session_id, None)
        return None if pid is None else TAKEN_OVER.format(pid=pid)

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

        log.info("session %s: taken over by term2-acp process %s", session.id, requester)
        self._taken[session.id] = requester  # the next prompt here is told, once
        if session.face.sink is not None:
            session.face.sink(session, ev.Notice(new_id("msg"), TAKEN_OVER.format(pid=requester)))
        state = _state(session)
        turn = session.lifecycle.greenlet
        self._cancel(session.id)
        if turn is not None:
            turn.join(self.settings.shutdown_timeout)
        session.group.kill(block=True, timeout=1)
        self._remember(session.id, state)  # dormant once released (lookups wait for that)
        self._release(session, forget_grants=False)


def _state(session):
    """What the session is made again with when it reopens (``reopen``)."""
    state = {key: getattr(session, key) for key in DORMANT_STATE}
    state["face"] = session.face
    return state


def _keeps_processes(session):
    """Whether background processes of the session's shell are running (an idle close
    would end them, so it waits)."""
    return session.shell.running() > 0
