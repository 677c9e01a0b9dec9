"""Session titles: the user's words first, then a short one the model makes; /rename.

A session is titled with the user's words as its first turn starts (the fallback, at
once). After that first turn one small request, off the turn's path, asks the model for a
title of a few words: it runs in the session's group (closing the session ends it), is
bounded (``TIMEOUT`` seconds, a few output tokens), never holds the next prompt, and any
failure keeps the fallback. The title is stored and sent as a session info update. A
title set by hand (``/rename``) is never replaced.
"""

import logging

import gevent

from term2acp.core import events as ev
from term2acp.core.text import one_line
from term2acp.providers import base as pb

log = logging.getLogger(__name__)

TIMEOUT = 20.0  # seconds the title request may take
LIMIT = 80  # characters of a title
SYSTEM = ("Write a short title (3 to 7 words) for the conversation below: what the user "
          "wants done. Answer with the title only: no quotes, no trailing period.")
PROMPT_CHARS = 2000  # of the user's first prompt sent with the request
ANSWER_CHARS = 600  # of the agent's first answer


def clean(text, limit=LIMIT):
    """One line of at most ``limit`` characters (whitespace collapsed, quotes trimmed)."""
    line = one_line(text or "", len(text or "") + 1).strip("\"'`\u201c\u201d*# ").rstrip(".")
    return line if len(line) <= limit else line[:limit - 1].rstrip() + "\u2026"


def set_title(session, title):
    """Store ``title`` and tell the editor (session_info_update)."""
    session.title = title
    stamp = session.store.touch(session.id, title)
    session.emit(ev.SessionInfoChanged(title=title, updated_at=stamp))
    session.commit()


def rename(session, text):
    """``/rename <title>``: the title the user gives; None when ``text`` is empty."""
    title = clean(text)
    if not title:
        return None
    session.title_manual = True
    set_title(session, title)
    return title


def request_model_title(session, prompt, settings):
    """After the session's first turn: ask the model for a title in the background."""
    if not settings.model_titles or session.provider is None \
            or getattr(session.provider, "serial", False):
        return  # an in-process model would make the next prompt wait: the words stay
    answer = next((m.get("content") for m in reversed(session.history)
                   if m.get("role") == "assistant" and m.get("content")), "")
    greenlet = session.group.spawn(_make_title, session, session.provider, prompt, answer)
    greenlet.name = f"title-{session.id}"


def _make_title(session, provider, prompt, answer):
    text = f"User: {str(prompt)[:PROMPT_CHARS]}"
    if answer:
        text += f"\n\nAgent: {str(answer)[:ANSWER_CHARS]}"
    request = pb.ModelRequest(model=session.model, system=SYSTEM,
                              messages=[{"role": "user", "content": text}], tools=[],
                              effort="default", max_output_tokens=256, purpose="title")
    parts = []
    try:
        with gevent.Timeout(TIMEOUT):
            for item in provider.stream(request):
                if type(item) is pb.TextDelta:
                    parts.append(item.text)
    except gevent.Timeout:
        log.info("session %s: the title request took longer than %gs; keeping the user's "
                 "words", session.id, TIMEOUT)
        return
    except Exception as exc:  # noqa: BLE001 - the user's words stay the title
        log.info("session %s: no model title (%s); keeping the user's words", session.id, exc)
        return
    title = clean("".join(parts))
    if not title or session.title_manual or session.closed:
        return
    try:
        set_title(session, title)
    except Exception:  # noqa: BLE001
        log.exception("session %s: could not store the model's title", session.id)
