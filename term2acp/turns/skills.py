"""Agent Skills: a folder with a ``SKILL.md`` (YAML front matter ``name``, ``description``;
the body is the instructions), the open format several agents read.

Where, the first of a name winning (the project's over the user's, ours over the peers'):
``.term2acp/skills/``, ``.claude/skills/``, ``.agents/skills/`` of the workspace, then
``skills/`` of the user's config dir, ``~/.claude/skills/``, ``~/.agents/skills/``.

Only each skill's name, description and ``SKILL.md`` path reach the model, as a context
note (``turns/notes.py``: the system prompt and the tool list stay as they are, so the
prompt cache's prefix holds; a changed set is a new note). The body is loaded when the
model calls the ``skill`` tool; a workspace skill's body only once the user trusts that
``SKILL.md`` (``core/trust.py``). A skill's scripts run through the normal sandboxed shell
and its approvals. The folders are looked at before each prompt (a ``stat`` a skill).
"""

import hashlib
import os

from marshmallow import Schema, fields

from term2acp.core.trust import usable
from term2acp.tools.base import Tool, ToolError, ToolResult
from term2acp.turns import sources

DESCRIPTION_CAP = 400  # characters of a description in the listing
FILES_SHOWN = 50


class Skill:
    __slots__ = ("name", "description", "path", "project")

    def __init__(self, name, description, path, project):
        self.name, self.description, self.path, self.project = name, description, path, project

    @property
    def folder(self):
        return os.path.dirname(self.path)


def parse(path, data, project):
    fields_, _body = sources.front_matter(data.decode("utf-8", "replace"))
    name = sources.text_field(fields_, "name") or os.path.basename(os.path.dirname(path))
    description = sources.text_field(fields_, "description")
    if not description:
        raise ValueError("a skill needs a description in its front matter")
    return Skill(name[:64], description[:DESCRIPTION_CAP], path, project)


class Skills:
    """One session's skill folders (``session.skills``)."""

    def __init__(self, root, settings):
        self.root = root
        home, mine = sources.home(settings), sources.config_dir(settings)
        places = [(os.path.join(root, ".term2acp", "skills"), True),
                  (os.path.join(root, ".claude", "skills"), True),
                  (os.path.join(root, ".agents", "skills"), True)]
        if mine:
            places.append((os.path.join(mine, "skills"), False))
        places += [(os.path.join(home, ".claude", "skills"), False),
                   (os.path.join(home, ".agents", "skills"), False)]
        seen, self.folders = set(), []
        for path, project in places:
            real = os.path.realpath(path)
            if real not in seen:
                seen.add(real)
                self.folders.append(sources.Folder(
                    path, sources.skill_file,
                    lambda p, d, project=project: parse(p, d, project), project))
        self.found = {}  # name -> Skill
        self.foreign = []

    def scan(self):
        found, self.foreign = {}, []
        for folder in self.folders:
            items, foreign = folder.scan()
            self.foreign += foreign
            for skill in items:
                found.setdefault(skill.name, skill)
        self.found = found
        return found

    def listing(self):
        """The context note's text, or "" when there is no skill."""
        if not self.found:
            return ""
        lines = [f"- {s.name}: {s.description} ({s.path})" for s in self.found.values()]
        return ("Skills (instructions for particular tasks; when one fits the task, load it "
                "with the skill tool before you start):\n" + "\n".join(lines))

    def fingerprint(self):
        text = self.listing()
        return hashlib.sha256(text.encode()).hexdigest()[:16] if text else ""


def refresh(session, settings, tell=True):
    """Look at the session's skill folders; its :class:`Skills` (``tell``: a workspace
    skill another user owns is named to the user, once)."""
    skills = session.skills
    if skills is None or skills.root != session.root:
        skills = session.skills = Skills(session.root, settings)
    skills.scan()
    for path in skills.foreign if tell else ():
        usable(session, path)
    return skills


class SkillParams(Schema):
    name = fields.String(required=True, metadata={"description": "The skill's name."})


class SkillTool(Tool):
    """Loads a skill's instructions (``SKILL.md`` without its front matter)."""

    name = "skill"
    kind = "read"
    Params = SkillParams
    description = ("Load the instructions of one of the skills listed in the session context "
                   "(by name): read them before doing the task the skill is for. Files the "
                   "skill mentions are in its folder; run its scripts with the shell.")

    def __init__(self, skills):
        self.skills = skills

    def title(self, args):
        return f"Skill {args.get('name', '')}"

    def locations(self, args, ctx):
        skill = self.skills.found.get(args.get("name"))
        return [{"path": skill.path}] if skill else []

    def run(self, args, ctx):
        skill = self.skills.found.get(args["name"])
        if skill is None:
            known = ", ".join(sorted(self.skills.found)) or "none"
            raise ToolError(f"There is no skill {args['name']!r}. Skills: {known}.")
        data = sources.read(skill.path)
        if data is None:
            raise ToolError(f"{skill.path} cannot be read any more.")
        trust = ctx.trust
        if skill.project and (trust is None or not trust(skill.path, data, "a skill")):
            raise ToolError(f"The user did not allow the skill {skill.name} ({skill.path}) in "
                            "this session; do the task without it.")
        _fields, body = sources.front_matter(data.decode("utf-8", "replace"))
        try:
            names = sorted(n for n in os.listdir(skill.folder) if n != "SKILL.md")
        except OSError:
            names = []
        files = ", ".join(names[:FILES_SHOWN]) + (" ..." if len(names) > FILES_SHOWN else "")
        head = f"Skill {skill.name} (folder {skill.folder}"
        head += f"; files: {files})" if files else ")"
        return ToolResult(f"{head}\n\n{body.strip()}")
