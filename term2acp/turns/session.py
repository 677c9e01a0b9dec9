"""What the turn layer may touch of a session: :class:`TurnSession`.

``turns/`` (and the tools, through their context) reads and writes a session only through
these names. ``sessions/live.py``'s ``LiveSession`` is one (it declares every attribute it
has in ``__slots__``, these and the session layer's own), ``turns/agents/child.py``'s
``ChildSession`` is another (the parent's, but for its own history, root and model).
``tests/unit/test_layering.py`` checks that ``turns/`` uses no other name of a session and
that ``LiveSession`` declares every name here.
"""

from typing import Any, Callable, Protocol


class TurnSession(Protocol):
    # Read: who and where the session is, and what it holds for the turn.
    id: str
    root: str  # canonical
    extra_roots: tuple  # the other roots (additionalDirectories), canonical
    workdir: str  # the session's scratch folder
    access: Any  # core.access.AccessState: the session's grants
    store: Any  # sessions.store.Store: named methods only (Store.turns, ...)
    lifecycle: Any  # sessions.lifecycle.Lifecycle: the running prompt's gate and state
    recording: Any  # sessions.recording.Recording, or None (a child's)
    group: Any  # gevent Group: greenlets that end with the session (a title request)
    provider: Any  # the model provider the session made (providers/)
    provider_id: str
    config_options: Any  # sessions.config_options.ConfigOptions, or None
    editor: Any  # the editor's file access (v1 fs/*, tools/base.py editor_of), or None
    images: bool  # the model takes images (set by the prompt before the turn)
    context_window: int  # tokens, from the catalog or the settings
    prompt_message_id: str  # the running prompt's user message id (checkpoints, records)
    sandbox_note: str  # the shell sandbox's state, for the context notes
    mcp_servers: list  # mcp.config.ServerConfig the client sent (and the workspace's)
    mcp: Any  # their running mcp.hub.McpHub, or None
    shell: Any  # tools.shell_state.SessionShell: its loopback and background processes
    language_servers: Any  # lsp.registry.SessionServers: its language servers
    stopping: bool  # session/cancel or session/close was read for the running prompt
    closed: bool

    # Read and written by the turn.
    model: str
    effort: str
    mode: str  # turns/modes.py: read-only | plan | ask | auto
    title: str
    title_manual: bool  # the user named the session (/title): no model title then
    history: list  # what the model sees, from the last compaction on
    history_rows: int  # rows of this session in the store's history
    cost: float  # USD of the history's priced requests
    interaction_seq: int  # the last question's number
    window_learned: int  # tokens, from an overflow error (turns/context.py), or None
    steering: list  # prompts sent during the turn (turns/steering.py)
    checkpoint: Any  # the running turn's turns.checkpoints.TurnCheckpoint, or None

    # Kept by the turn layer between prompts, each made by its module on first use (None
    # before): turns/context.py, request_view.py (twice), notes.py + instructions.py,
    # skills.py, filecommands.py, hooks.py, projectmcp.py, core/trust.py.
    context_size: Any
    request_view: Any
    notes_told: Any
    instructions: Any
    skills: Any
    file_commands: Any
    hooks: Any
    project_mcp: Any
    trust: Any

    emit: Callable  # (event): recorded in the journal and shown by the face
    commit: Callable  # (): everything emitted and written so far is committed
    append_history: Callable  # (message): to the history and the store
    store_history: Callable  # (message): to the store only (a compaction's copies)
