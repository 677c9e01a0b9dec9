"""Session-scoped grants: folders allowed for reading, files and folders for editing, MCP
tools, and for shell commands the host network (all of them) and, in ask mode, commands
that start with given words.

Path grants are keyed to canonical paths, never to tool names. All live in memory only
and are cleared when the session closes.
"""

import os

from term2acp.core.workspace import is_within


class AccessState:
    def __init__(self, root):
        self.root = root
        self.extra_roots = ()  # the session's additional roots: workspaces like the root
        self.read_folders = set()
        self.edit_files = set()
        self.edit_folders = set()
        self.tools = set()  # MCP server tools allowed for the session: ("mcp", server, tool)
        self.network = False  # every command of the session may have the host network
        self.command_prefixes = set()  # word tuples: ask mode runs these without asking

    def allow_read_folder(self, folder):
        self.read_folders.add(folder)

    def allow_edit_file(self, path):
        self.edit_files.add(path)

    def allow_edit_folder(self, folder):
        self.edit_folders.add(folder)

    def allow_tool(self, key):
        self.tools.add(key)

    def can_use_tool(self, key):
        return key in self.tools

    def grant(self, choice, request):
        """Record what an allow ``choice`` of ``request`` grants for the session (an
        ``core.approvals.ApprovalRequest``; a choice that grants nothing records nothing)."""
        path, prefix = request.path, request.prefix
        if choice in ("allow-tool-session", "allow-host-session") and request.grant:
            self.allow_tool(request.grant)  # an MCP tool, or a web host ("web", host)
        elif choice == "allow-network-session":
            self.network = True
        elif choice == "allow-command-prefix-session" and prefix:
            self.command_prefixes.add(tuple(prefix))
        elif not path:
            return
        elif choice == "allow-folder-session":
            self.allow_read_folder(path)
        elif choice == "allow-edit-file-session":
            self.allow_edit_file(path)
        elif choice == "allow-edit-folder-session":
            self.allow_edit_folder(os.path.dirname(path))

    def has_network(self):
        """The session granted the host network to all its commands (the only network
        grant: a prefix cannot bound what a program does with the network)."""
        return self.network

    def runs_unasked(self, words):
        """Ask mode may run a command of these words without asking."""
        return _starts_with_any(words, self.command_prefixes)

    def in_workspace(self, path):
        """Inside the root or one of the additional roots."""
        return is_within(self.root, path) or any(is_within(r, path) for r in self.extra_roots)

    def can_read(self, path):
        """Reads are free inside the roots, and inside granted read or edit folders."""
        if self.in_workspace(path) or path in self.edit_files:
            return True
        return any(is_within(f, path) for f in self.read_folders | self.edit_folders)

    def can_edit(self, path):
        if self.in_workspace(path) or path in self.edit_files:
            return True
        return any(is_within(f, path) for f in self.edit_folders)

    def clear(self):
        self.read_folders.clear()
        self.edit_files.clear()
        self.edit_folders.clear()
        self.tools.clear()
        self.network = False
        self.command_prefixes.clear()


def _starts_with_any(words, prefixes):
    if not words:
        return False
    return any(tuple(words[:len(prefix)]) == prefix for prefix in prefixes)
