"""Context notes: what the model must know of the session that may change within it.

The system prompt and the tool list are the front of every request, and a provider's
prompt cache only serves a request whose front is unchanged; so they hold nothing that can
change within a session (or between sessions, or across a restart). The workspace root,
the platform, the date, the session's mode, the shell sandbox's state and the project
instructions (AGENTS.md) reach the model as a *note*: a user message put in the history
where the change happened, before the next model request (the prompt's note just before
the prompt, so the user's words stay last).
The first request of a session (and the first after a compaction, whose summary folds
the earlier notes away) gets them all; later requests get a note only for what changed: a
mode switch, a new day, an edited AGENTS.md (looked at once a prompt).

Each note message carries the facts it told (``notes``: key -> fingerprint), so what the
model was told is read back from the history itself, and a resumed session sends the same
bytes it sent before the restart.
"""

import hashlib
import platform
from datetime import date

from term2acp.core import events as ev
from term2acp.core.ids import new_id
from term2acp.turns import instructions, modes, request_view

OPEN, CLOSE = "<context>", "</context>"

MODE_TEXT = {
    modes.READ_ONLY: ("The session is in READ-ONLY mode: you may read and search files, but "
                      "you must not create or edit files or run commands (such calls are "
                      "refused). Describe the changes you would make instead."),
    modes.PLAN: ("The session is in PLAN mode: read and search to understand the task, keep "
                 "the steps with update_plan, and do not create or edit files or run commands "
                 "(such calls are refused). When the plan is ready, call finish_plan with a "
                 "short summary: the user then chooses to start the work (and the mode) or to "
                 "keep planning."),
    modes.ASK: ("The session is in ASK mode: the user approves every file change and every "
                "command before it runs."),
    modes.AUTO: ("The session is in AUTO mode: file changes inside the workspace and "
                 "sandboxed commands run without asking; anything else asks the user."),
}


def facts(session, keys=None):
    """``key -> (fingerprint, line)`` of what the model should know now (``keys``: only
    those)."""
    mode = modes.normal(session.mode)
    system = f"{platform.system()} {platform.release()}"
    today = date.today().isoformat()
    out = {
        "root": (session.root, f"Workspace root: {session.root}"),
        "platform": (system, f"Platform: {system}"),
        "date": (today, f"Today's date: {today}"),
        "mode": (mode, MODE_TEXT.get(mode, MODE_TEXT[modes.AUTO])),
    }
    extra = session.extra_roots  # additionalDirectories: workspaces too
    out["roots"] = ("\n".join(extra), "Other workspace roots (read and change files there as "
                    "in the root; give their paths absolute): " + ", ".join(extra) if extra
                    else "No other workspace roots any more.")
    sandbox = session.sandbox_note
    if sandbox:  # the shell sandbox's state: it can differ after a restart
        out["sandbox"] = (sandbox, f"Shell sandbox: {sandbox}")
    if keys is not None:
        return {key: out[key] for key in keys if key in out}
    rules = _instructions(session)
    digest = hashlib.sha256(rules.encode()).hexdigest()[:16] if rules else ""
    out["instructions"] = (digest, rules.strip())
    skills = session.skills  # turns/skills.py, looked at once a prompt
    listing = skills.listing() if skills is not None else ""
    out["skills"] = (skills.fingerprint() if listing else "", listing)
    return out


def _instructions(session):
    """The AGENTS.md text; the user is told (a thought) the first time and on changes."""
    state = session.instructions
    extra = session.extra_roots
    if state is None or state.root != session.root or state.extra != tuple(extra):
        state = session.instructions = instructions.Instructions(session.root, extra=extra)
    text, notice = state.load()
    if notice:  # a thought: clients that print the answer alone must not print this
        # its own block: clients that join thought chunks must not run it into the next
        session.emit(ev.ThoughtChunk(new_id("thought"), notice.strip() + "\n\n"))
    return text


# what may be absent, and what the model is told once it is gone
GONE = {"instructions": "No project instructions (AGENTS.md) are in use any more.",
        "skills": "No skills are available any more."}

# checked before every model request (AGENTS.md: once a prompt)
WITHIN_TURN = ("root", "roots", "platform", "date", "mode", "sandbox")


def pending(session, keys=None):
    """The note message the model needs before its next request, or None; ``keys``: only
    those facts (default: all)."""
    now = facts(session, keys)
    before = request_view.told(session)
    changed = [key for key, (mark, _line) in now.items() if before.get(key, "") != mark
               or (key not in before and key not in ("roots", *GONE))]
    if not changed:
        return None
    lines = [now[key][1] if key not in GONE or now[key][0] else GONE[key] for key in changed]
    heading = "Session context" if not before else "Session context changed"
    text = f"{OPEN}\n{heading}:\n" + "\n".join(lines) + f"\n{CLOSE}"
    return {"role": "user", "content": text,
            "notes": {key: now[key][0] for key in changed}}


def in_system(session):
    """For a small in-process model (a provider's ``brief_prompt``; no prompt cache to
    keep, and its greedy output depends on every token it was tuned on): the mode and the
    AGENTS.md text go at the end of its system prompt, as before the notes, instead."""
    mode = modes.normal(session.mode)
    text = "" if mode == modes.AUTO else "\n\n" + MODE_TEXT[mode]
    return text + _instructions(session)


def add_pending(session, keys=None):
    """Put the pending note, if any, into the session's history (never for a provider
    with a ``brief_prompt``: see :func:`in_system`)."""
    if getattr(session.provider, "brief_prompt", False):
        return None
    note = pending(session, keys)
    if note is not None:
        session.append_history(note)
    return note
