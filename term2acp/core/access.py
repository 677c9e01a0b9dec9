"""Session-scoped grants: folders allowed for reading, files and folders for editing.

Grants are keyed to canonical paths, never to tool names, live in memory only and are
cleared when the session closes.
"""

from term2acp.core.workspace import is_within


class AccessState:
    def __init__(self, root):
        self.root = root
        self.read_folders = set()
        self.edit_files = set()
        self.edit_folders = set()
        self.tools = set()  # MCP server tools allowed for the session: ("mcp", server, tool)

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

    def can_read(self, path):
        """Reads are free inside the root, and inside granted read or edit folders."""
        if is_within(self.root, path) or path in self.edit_files:
            return True
        return any(is_within(f, path) for f in self.read_folders | self.edit_folders)

    def can_edit(self, path):
        if is_within(self.root, path) or path in self.edit_files:
            return True
        return any(is_within(f, path) for f in self.edit_folders)

    def clear(self):
        self.read_folders.clear()
        self.edit_files.clear()
        self.edit_folders.clear()
        self.tools.clear()
