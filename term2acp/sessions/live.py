"""A session that is live in this process, and the OS lock that makes it exclusive."""

import errno
import fcntl
import logging
import os
import time

from gevent.pool import Group

from term2acp.core import events as ev
from term2acp.core import executables, private
from term2acp.core.access import AccessState
from term2acp.lsp.registry import SessionServers
from term2acp.sessions.errors import SessionLocked
from term2acp.sessions.facelink import NO_FACE
from term2acp.sessions.journal import Recorder
from term2acp.sessions.lifecycle import Lifecycle
from term2acp.sessions.recording import Recording
from term2acp.tools.shell_state import SessionShell

log = logging.getLogger(__name__)


class SessionLock:
    """``flock`` on ``<data>/locks/<id>.lock``: the kernel releases it when a process dies."""

    def __init__(self, directory, session_id):
        private.make_dirs(directory)
        self.path = os.path.join(directory, f"{session_id}.lock")
        self.fd = None

    def acquire(self):
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise SessionLocked(holder) from None
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self.fd = fd

    def release(self):
        if self.fd is not None:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            finally:
                os.close(self.fd)
                self.fd = None


class LiveSession:
    """A session live here. Every attribute is declared (``__slots__``) and made in the
    constructor: what the turn layer may touch of it is ``turns/session.py``'s
    ``TurnSession``; the rest is the session layer's. Setting a name not declared fails."""

    __slots__ = (
        # TurnSession's (turns/session.py)
        "id", "root", "extra_roots", "workdir", "access", "store", "lifecycle", "recording",
        "group", "provider", "provider_id", "config_options", "editor", "images",
        "context_window", "prompt_message_id", "sandbox_note", "mcp_servers", "mcp", "model",
        "effort", "mode", "title", "title_manual", "history", "history_rows", "cost",
        "interaction_seq", "window_learned", "steering", "checkpoint", "context_size",
        "request_view", "notes_told", "instructions", "skills", "file_commands", "hooks",
        "project_mcp", "trust",
        # what the session owns and closes with itself
        "shell", "language_servers", "lock",
        # the session layer's (sessions/, mcp/session.py); ``face``: the FaceLink it was
        # opened with (config_options and editor above are made of it)
        "recorder", "face", "last_used", "title_words", "mcp_stored", "mcp_data_dir",
        "held_processes",
    )

    def __init__(self, row, store, lock, workdir, face=NO_FACE, effort="default", mode="auto"):
        """``effort`` and ``mode``: the settings' defaults (a choice the row stores wins)."""
        self.id = row["id"]
        self.root = row["cwd"]
        executables.note_root(self.root)  # no program the agent starts may come from here
        self.title = row.get("title")
        self.title_manual = False  # the user named it (/title): no model title (turns/titles.py)
        self.title_words = None  # the first prompt's words, for the model's title
        self.provider_id = row.get("provider")
        self.model = row.get("model")
        self.effort = row.get("effort") or effort
        self.mode = row.get("mode") or mode  # turns/modes.py: read-only | plan | ask | auto
        self.face = face
        self.config_options = face.config_options  # sessions.config_options.ConfigOptions
        self.context_window = None
        self.window_learned = None  # tokens, from an overflow error (turns/context.py)
        self.images = False  # the model takes images (sessions/prompts.py, each prompt)
        self.store = store
        self.lock = lock
        self.workdir = workdir
        self.access = AccessState(self.root)
        self.extra_roots = ()  # additionalDirectories: canonical, each a workspace too
        self.steering = []  # prompts sent during the turn: they join it (turns/steering.py)
        self.mcp_servers = []  # mcp.config.ServerConfig the client sent (new/resume/load)
        self.mcp_stored = row.get("mcp_servers") or []  # what the store says (describe())
        self.mcp = None  # their running mcp.hub.McpHub (term2acp/mcp/session.py)
        self.mcp_data_dir = None  # where their sign-ins are kept (mcp/session.py)
        self.recorder = Recorder(store, self.id)
        self.recording = Recording(store, self.id, self.root)  # for export
        self.history = []
        self.history_rows = 0  # rows of this session in the store's history (seq 1..n)
        self.checkpoint = None  # the running turn's sessions.checkpoints.TurnCheckpoint
        self.prompt_message_id = None  # the running prompt's user message id
        self.group = Group()
        # What the session owns and closes with itself (SessionManager._release): its shell
        # (loopback and background processes) and its language servers, made on first use.
        self.shell = SessionShell()
        self.language_servers = SessionServers()
        self.editor = None if face.editor is None else face.editor(self.id)  # v1 fs/*
        self.provider = None
        self.lifecycle = Lifecycle(self.id, self.emit)  # the prompt state machine
        self.interaction_seq = 0
        self.cost = 0.0  # USD, the sum of the history's priced requests (turns/turn.py)
        self.sandbox_note = None  # the shell sandbox's state, for the context notes
        self.held_processes = None  # the freeze of its processes in read-only or plan mode
        self.last_used = time.monotonic()
        # The turn layer's, each made by its module on first use (turns/session.py).
        self.context_size = self.request_view = self.notes_told = None
        self.instructions = self.skills = self.file_commands = self.hooks = None
        self.project_mcp = self.trust = None

    def set_roots(self, extra_roots):
        """The session's additional roots (the complete list the client sent with
        new/resume/load/fork, canonical): tools, grants, the sandbox and AGENTS.md treat
        each as they treat the root."""
        self.extra_roots = tuple(r for r in dict.fromkeys(extra_roots) if r != self.root)
        self.access.extra_roots = self.extra_roots
        for root in self.extra_roots:
            executables.note_root(root)

    # What the turn and the faces ask; every answer comes from the one state machine.
    @property
    def busy(self):
        return self.lifecycle.busy

    @property
    def closed(self):
        return self.lifecycle.closed

    @property
    def stopping(self):
        """session/cancel or session/close was read for the current prompt."""
        return self.lifecycle.stopping

    def commit(self):
        """Everything emitted and written so far is committed; raises the StoreError of a
        batch that lost this session's changes (also one the protocol writer sent)."""
        self.store.commit(self.id)

    def emit(self, event):
        self.recorder.record(event)
        kind = type(event)
        if kind is ev.ToolCallReported and (event.locations or event.content):
            self.recording.observe(self.prompt_message_id, event)  # files
        sink = self.face.sink
        if sink is not None:
            if (kind is ev.TextChunk or kind is ev.ThoughtChunk) and self.lifecycle.stopping:
                return  # recorded for replay; a cancelled turn streams no more chunks
            sink(self, event)

    def append_history(self, message):
        self.history.append(message)
        self.store_history(message)

    def store_history(self, message):
        """Append ``message`` to the stored history only (a compaction's copies)."""
        self.history_rows += 1
        self.store.append_history(self.id, message)
