"""The workspace's ``.mcp.json`` (Claude Code's project MCP servers), merged with the
servers the editor sent.

``{"mcpServers": {"<name>": {"command": ..., "args": [...], "env": {...}}}}``, or
``{"type": "http", "url": ..., "headers": {...}}`` (``"sse"`` too). Looked at before each
prompt (a ``stat``); a file that changed is read, and used only once the user trusts that
content (``core/trust.py``): its servers start beside the editor's, whose win on a name
clash, and their tools are offered like theirs. A command that is not a path is looked up
on ``PATH`` when the server starts, as for an editor's v1 entry.
"""

import json
import logging
import os

from term2acp.core import events as ev
from term2acp.core.ids import new_id
from term2acp.mcp import config as mcp_config
from term2acp.mcp import session as mcp_session
from term2acp.turns import sources, trusting

log = logging.getLogger(__name__)

NAME = ".mcp.json"


class ProjectServers:
    """One session's view of its workspace's ``.mcp.json``."""

    def __init__(self, root):
        self.path = os.path.join(root, NAME)
        self.seen = None  # (size, mtime, inode) looked at
        self.configs = []  # its servers, once trusted
        self.editor = None  # the editor's servers when they were merged
        self.merged = None  # the list given to the session (to see a new one from the editor)


def entries(data):
    """ACP-shaped server entries of a ``.mcp.json`` text; raises ValueError."""
    loaded = json.loads(data.decode("utf-8"))
    servers = loaded.get("mcpServers") if isinstance(loaded, dict) else None
    if servers is None:
        return []
    if not isinstance(servers, dict):
        raise ValueError('"mcpServers" must be an object of servers by name')
    out = []
    for name, entry in servers.items():
        if not isinstance(entry, dict):
            raise ValueError(f"server {name!r} must be an object")
        item = {"name": name}
        kind = entry.get("type") or ("http" if "url" in entry else "stdio")
        if kind != "stdio":
            item.update(type=kind, url=entry.get("url"),
                        headers=_pairs(entry.get("headers"), name, "headers"))
        else:
            item.update(command=entry.get("command"), args=entry.get("args") or [],
                        env=_pairs(entry.get("env"), name, "env"))
        out.append(item)
    return out


def _pairs(table, name, what):
    if table is None:
        return []
    if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
        raise ValueError(f"server {name!r}: {what} must be an object of strings")
    return [{"name": k, "value": v} for k, v in table.items()]


def refresh(turn):
    """Before a prompt: the workspace's servers join the session's (asking first when the
    file is new or changed). Returns True when the session's servers changed."""
    session = turn.session
    state = session.project_mcp
    if state is None or state.path != os.path.join(session.root, NAME):
        state = session.project_mcp = ProjectServers(session.root)
    try:
        info = os.stat(state.path)
        signature = (info.st_size, info.st_mtime_ns, info.st_ino)
    except OSError:
        signature = None
    if signature != state.seen:
        state.seen, state.configs = signature, []
        if signature is not None:
            state.configs = _read(turn, state.path)
    current = list(session.mcp_servers)
    if state.merged is None or current != state.merged:
        state.editor = current  # the editor sent its servers again (or this is the first look)
    taken = {c.name for c in state.editor}
    merged = state.editor + [c for c in state.configs if c.name not in taken]
    state.merged = merged
    if merged == current:
        return False
    settings = turn.settings
    mcp_session.connect(session, merged, call_timeout=settings.mcp.call_timeout)
    return True


def _read(turn, path):
    data = sources.read(path)
    if data is None:
        return []
    try:
        configs = mcp_config.parse_servers(entries(data), absolute_command=False)
    except ValueError as exc:
        turn.session.emit(ev.ThoughtChunk(new_id("thought"), f"Ignored {path}: {exc}"))
        return []
    if not configs or not trusting.decide(turn, path, data, "MCP servers"):
        return []
    return configs
