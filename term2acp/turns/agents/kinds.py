"""The kinds of sub-agent the ``agent`` tool starts: two built in, more from agent files.

* ``general``: the parent's tools (``agent`` included, though a child cannot start another),
  system prompt, mode and grants; its requests begin with the parent's bytes.
* ``explore``: reads and searches only (read_file, list_directory, glob, grep, web_fetch).

An agent file is Markdown with front matter (``turns/sources.py``): ``name``,
``description``, ``tools`` (a list or a comma-separated string; Claude Code's tool names
map to ours), ``model`` (``inherit``: the parent's), ``effort``; the body is the kind's
instructions. The file's stem is the kind's name. Where they are read from, first found
wins: the project's ``.term2acp/agents/`` and ``.claude/agents/`` (used only once the user
trusts the file's content, ``core/trust.py``), then ``agents/`` beside the user's config
file (the user's own, never asked about). A built-in name is never replaced.
"""

import os

from term2acp.core.option_values import EFFORTS
from term2acp.turns.sources import front_matter, read

GENERAL, EXPLORE = "general", "explore"
EXPLORE_TOOLS = ("read_file", "list_directory", "glob", "grep", "web_fetch")
PROJECT_DIRS = (".term2acp/agents", ".claude/agents")
MAX_FILES = 64  # per folder

# Claude Code's tool names -> ours (a name of ours is taken as it is).
CLAUDE_TOOLS = {
    "read": ("read_file",), "grep": ("grep",), "glob": ("glob",), "ls": ("list_directory",),
    "bash": ("shell", "shell_output", "shell_kill"), "bashoutput": ("shell_output",),
    "killshell": ("shell_kill",), "killbash": ("shell_kill",),
    "edit": ("edit_file", "apply_patch"), "multiedit": ("edit_file", "apply_patch"),
    "write": ("create_file",), "webfetch": ("web_fetch",), "todowrite": ("update_plan",),
    "task": ("agent",),  # a sub-agent of its own: dropped (depth 1)
}
INHERIT = ("inherit", "", None)

GENERAL_TEXT = (
    "You are a sub-agent: the main agent gave you the task below. Work on it alone with "
    "your tools; you cannot start other sub-agents, and the user does not read your "
    "messages, only the main agent does. When you are done, your last message is your "
    "answer to the main agent: what you found or changed (paths, line numbers), how you "
    "checked it, and what is left. Be complete and brief.")
EXPLORE_TEXT = (
    "You are an explore sub-agent: the main agent gave you the question below. Find the "
    "answer in the workspace by reading and searching (read_file, list_directory, glob, "
    "grep; web_fetch for a page the task names). You cannot change files or run commands. "
    "Your last message is your answer to the main agent: the facts it needs, with paths "
    "and line numbers, and no file dumps.")


class Kind:
    """One kind of sub-agent."""

    def __init__(self, name, description, instructions, tools=None, model=None, effort=None,
                 path=None, project=False, content=None):
        self.name = name
        self.description = description
        self.instructions = instructions
        self.tools = tools  # tool names offered (ours), or None: the parent's
        self.model = model  # None: the parent's
        self.effort = effort  # None: the parent's
        self.path = path  # the agent file, or None (built in)
        self.project = project  # from the workspace: used only once trusted
        self.content = content  # the file's bytes, as read (what trust is about)

    def offered(self, tools):
        """The tools (name -> Tool) a child of this kind is offered, of the parent's
        ``tools``; the same dict when it takes them all (the request prefix stays)."""
        if self.tools is None:
            return tools
        return {name: tool for name, tool in tools.items() if name in self.tools}


BUILT_IN = {
    GENERAL: Kind(GENERAL, "A sub-agent with your tools, mode and permissions, for a "
                           "self-contained task (isolation \"overlay\": it works on a copy of "
                           "the workspace whose changes the user applies as one diff)",
                  GENERAL_TEXT),
    EXPLORE: Kind(EXPLORE, "A read-only sub-agent that searches and reads the workspace to "
                           "answer a question (it cannot change files or run commands)",
                  EXPLORE_TEXT, tools=EXPLORE_TOOLS),
}


def tool_names(value):
    """An agent file's ``tools`` (a list or a comma-separated string) as our tool names;
    None when it names none (all of the parent's)."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list):
        return None
    names = []
    for item in items:
        word = str(item).strip()
        if not word:
            continue
        base = word.split("(", 1)[0].strip()  # Claude Code's Bash(git:*) style
        names.extend(CLAUDE_TOOLS.get(base.lower(), (base,)))
    return tuple(dict.fromkeys(n for n in names if n != "agent")) or None


def from_file(path, project):
    """The :class:`Kind` an agent file describes, or None (not a readable regular file
    under the size cap of ``turns/sources.py``)."""
    content = read(path)
    if content is None:
        return None
    fields, body = front_matter(content.decode("utf-8", "replace"))
    model = fields.get("model")
    model = None if model in INHERIT or str(model).lower() in ("sonnet", "opus", "haiku") \
        else str(model)  # Claude Code's aliases name its own models: the parent's here
    effort = fields.get("effort")
    effort = str(effort) if effort is not None and str(effort) in EFFORTS else None
    stem = os.path.splitext(os.path.basename(path))[0]
    description = " ".join(str(fields.get("description") or "").split()) or f"agent file {stem}"
    return Kind(stem, description, body.strip(), tool_names(fields.get("tools")), model, effort,
                path=path, project=project, content=content)


def folders(root, config_path):
    """``(folder, project)`` in the order they are looked at."""
    out = [(os.path.join(root, rel), True) for rel in PROJECT_DIRS] if root else []
    if config_path:
        out.append((os.path.join(os.path.dirname(config_path), "agents"), False))
    return out


def discover(root, config_path):
    """``name -> Kind``: the built-ins, then the agent files found (first found wins)."""
    kinds = dict(BUILT_IN)
    for folder, project in folders(root, config_path):
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith(".md"))[:MAX_FILES]
        except OSError:
            continue
        for name in names:
            stem = name[:-3]
            if stem not in kinds:
                kind = from_file(os.path.join(folder, name), project)
                if kind is not None:
                    kinds[stem] = kind
    return kinds
