"""Compaction: the older part of a conversation summarized by the model, on ``/compact``,
past :data:`~term2acp.turns.context.THRESHOLD` of the window before a model request, or when
the provider answers an overflow (:class:`ContextGuard`, around each request of the turn).

Kept intact: the system prompt and project instructions (they are not history), and the
most recent exchanges; history is cut only between *units* (``context.units``), so a tool
call is never separated from its result. In the store the full history stays; a
``{"role": "compaction"}`` marker followed by copies of the kept messages is appended, and
a resumed session continues from the last marker (``context.resume_view``). The journal
gets a ``compaction`` record for replay.

:func:`compact` is the entry point for both the turn and the ``/compact`` command.
"""

import logging
import time
import uuid

import gevent

from term2acp.core import events as ev
from term2acp.providers import base as pb
from term2acp.providers.errors import ContextOverflow, ProviderError
from term2acp.turns.context import (CHARS_PER_TOKEN, MARKER, THRESHOLD,
                                    cap_result, estimate, forget_window, history_tokens,
                                    is_marker, learn_window, result_cap, schema_text,
                                    unit_tokens, units, window_of)
from term2acp.turns.failures import seconds
from term2acp.turns.request_view import request_messages
from term2acp.turns.waiting import watch

log = logging.getLogger(__name__)

KEEP_SHARE = 0.5  # of the room under the threshold, what the kept recent exchanges may use
SUMMARY_SHARE = 0.25  # of that room, the summary's budget (tokens)
SUMMARY_MIN, SUMMARY_MAX = 64, 2000  # tokens a summary may use
CHUNK_SHARE = 0.6  # of the window, what one summarization request may carry
TRANSCRIPT_TEXT_CAP = 2000  # characters of one message in the summarizer's transcript
TRANSCRIPT_RESULT_CAP = 600  # characters of one tool result there
MAX_SUMMARY_REQUESTS = 16

SUMMARY_SYSTEM = (
    "You compact coding-agent conversations. Write a concise summary of the conversation "
    "excerpt you are given, for the same agent to continue the work: the user's goals and "
    "requests (quote the latest request), decisions made, files read or changed (with paths), "
    "commands run and their outcomes, errors, and what remains to do. Plain text, no preamble.")


class CompactionFailed(ProviderError):
    """Compaction could not make the conversation fit; the message says why (user-facing)."""


class Compacted:
    """What one compaction did (for /compact's answer and the bench)."""

    __slots__ = ("compaction_id", "summary", "before", "after", "folded", "kept", "requests",
                 "input_tokens", "output_tokens", "seconds")

    def __init__(self, **fields):
        for name in self.__slots__:
            setattr(self, name, fields.get(name))


# ---------------------------------------------------------------- compaction
def compact(session, provider=None, system="", settings=None, reason="manual", window=None):
    """Summarize the older part of ``session``'s conversation; returns :class:`Compacted`.

    The entry point of ``/compact`` (``reason="manual"``) and of the turn (``"threshold"``,
    ``"overflow"``). Emits ``CompactionReported`` events (in progress, then completed or
    failed); raises :class:`CompactionFailed` when there is nothing older to summarize or the
    summary cannot be made. Cancellation (``GreenletExit``) reports it cancelled.
    """
    provider = provider or session.provider
    if provider is None:
        raise CompactionFailed("compacting failed because no model provider is set up yet "
                               "(send a prompt first)")
    window = window or window_of(session, provider, settings)
    started = time.monotonic()
    history = list(session.history)
    before = estimate(system, history)
    keep, older = _split(history, system, window, manual=reason == "manual")
    if not older:
        raise CompactionFailed(_nothing_older(history, keep, system, window))
    compaction_id = f"cmp_{uuid.uuid4().hex[:16]}"
    session.emit(ev.CompactionReported(compaction_id, "in_progress", reason=reason,
                                       text="Compacting the conversation...\n\n"))
    try:
        summary, stats = _summarize(session, provider, older, window)
    except gevent.GreenletExit:
        session.emit(ev.CompactionReported(compaction_id, "cancelled", reason=reason))
        raise
    except Exception as exc:  # noqa: BLE001 - any failure is reported, then re-raised
        why = _why(exc)
        session.emit(ev.CompactionReported(compaction_id, "failed", error=why, reason=reason))
        if isinstance(exc, CompactionFailed):
            raise
        raise CompactionFailed(f"compacting failed because {why}") from None
    folded = sum(len(unit) for unit in older)
    marker = {"role": MARKER, "id": compaction_id, "summary": summary, "folded": folded,
              "window": session.window_learned}
    kept = [message for unit in keep for message in unit]
    for message in [marker] + kept:
        session.store_history(message)  # counts the session's stored rows
    session.history = [marker] + kept
    after = estimate(system, session.history)
    session.emit(ev.CompactionReported(
        compaction_id, "completed", summary=summary, reason=reason,
        text=_told(reason, before, after, window, folded)))
    return Compacted(compaction_id=compaction_id, summary=summary, before=before, after=after,
                     folded=folded, kept=len(kept), requests=stats[0], input_tokens=stats[1],
                     output_tokens=stats[2], seconds=time.monotonic() - started)


def _split(history, system, window, manual):
    """``(kept units, older units)``: the most recent units that fit the keep budget."""
    parts = units(history)
    if window:
        room = max(0, THRESHOLD * window - estimate(system, []))
        budget = room * KEEP_SHARE
        fits_alone = room * (1 - SUMMARY_SHARE)
    else:
        budget = fits_alone = None
    kept, used = [], 0
    for unit in reversed(parts):
        size = unit_tokens(unit)
        if is_marker(unit[0]):
            break  # an earlier summary is folded into the new one
        if not kept and unit[0].get("role") == "user":
            pass  # the user's latest request is kept whole, never summarized away
        elif budget is None or manual:
            if len(kept) >= 2 or (budget is not None and used + size > budget and kept):
                break  # /compact keeps at most the last exchange
        elif used + size > budget and (kept or size > fits_alone):
            break
        kept.insert(0, unit)
        used += size
    if not kept and parts and parts[-1][0].get("role") == "user":
        return [], []  # the user's latest request alone does not fit: never summarize it away
    while len(kept) > 1 and kept[0][0].get("role") == "assistant" and any(
            unit[0].get("role") == "user" for unit in kept[1:]):
        kept.pop(0)  # start what is kept at a user message when one follows
    older = parts[:len(parts) - len(kept)]
    if older and all(is_marker(u[0]) for u in older) and not manual:
        return kept, []  # only a summary is older: summarizing it again gains nothing
    return kept, older


def _nothing_older(history, keep, system, window):
    if not history:
        return "compacting failed because the conversation is empty"
    latest = [m for unit in keep for m in unit] or units(history)[-1]
    size = estimate(system, latest)
    if window and size > THRESHOLD * window:
        return (f"compacting failed because the latest exchange alone is about {size:,} tokens, "
                f"more than fits the model's {window:,}-token context window; start a new "
                "session or send a shorter prompt")
    return "compacting failed because there is nothing older to summarize yet"


def _why(exc):
    if isinstance(exc, CompactionFailed):
        return str(exc).removeprefix("compacting failed because ")
    if isinstance(exc, ContextOverflow):
        return "even the summary request did not fit the model's context window"
    text = str(exc) or type(exc).__name__
    return f"the summary request failed: {text}" if isinstance(exc, ProviderError) \
        else f"of an internal error ({type(exc).__name__})"


def _told(reason, before, after, window, folded):
    why = {"manual": "as asked", "overflow": "because the model refused the request as too long",
           "threshold": "because it neared the model's context window"}.get(reason, "")
    size = f" of the {window:,}-token window" if window else ""
    return (f"Context compacted {why}: {folded} earlier messages were summarized (about "
            f"{before:,} -> {after:,} tokens{size}). The full history stays in the session "
            "for replay.\n\n")


# ---------------------------------------------------------------- summarizing
def transcript(units_):
    """The older units as plain text for the summarizer (long texts shortened)."""
    lines = []
    for unit in units_:
        for message in unit:
            role = message.get("role")
            if role == MARKER:
                lines.append(f"Earlier summary:\n{message.get('summary') or ''}")
            elif role == "user":
                lines.append(f"User: {_short(message.get('content'), TRANSCRIPT_TEXT_CAP)}")
            elif role == "assistant":
                if message.get("content"):
                    lines.append(f"Assistant: {_short(message['content'], TRANSCRIPT_TEXT_CAP)}")
                for call in message.get("tool_calls") or ():
                    lines.append(f"Assistant called {call.get('name')}"
                                 f"({_short(call.get('arguments'), 300)})")
            elif role == "tool":
                status = "error" if message.get("is_error") else "result"
                lines.append(f"Tool {message.get('name') or ''} {status}: "
                             f"{_short(message.get('content'), TRANSCRIPT_RESULT_CAP)}")
    return lines


def _short(text, cap):
    text = text or ""
    return text if len(text) <= cap else text[:cap] + f" [... {len(text) - cap:,} more characters]"


def _chunks(lines, budget):
    chunk, size = [], 0
    for line in lines:
        line = line[:budget]
        if chunk and size + len(line) > budget:
            yield "\n".join(chunk)
            chunk, size = [], 0
        chunk.append(line)
        size += len(line) + 1
    if chunk:
        yield "\n".join(chunk)


def _summarize(session, provider, older, window):
    """The summary text and ``(requests, input tokens, output tokens)``."""
    lines = transcript(older)
    summary_tokens = SUMMARY_MAX
    budget = 400_000
    if window:
        room = max(0, THRESHOLD * window)
        summary_tokens = int(min(SUMMARY_MAX, max(SUMMARY_MIN, room * KEEP_SHARE * SUMMARY_SHARE)))
        budget = max(400, int(window * CHUNK_SHARE * CHARS_PER_TOKEN) - len(SUMMARY_SYSTEM)
                     - summary_tokens * CHARS_PER_TOKEN)
    stats = [0, 0, 0]
    for _attempt in range(3):
        try:
            return _rolling_summary(session, provider, lines, budget, summary_tokens, stats,
                                    window), stats
        except ContextOverflow:
            budget //= 2  # the window is smaller than we thought
            if budget < 400:
                raise
    raise CompactionFailed("compacting failed because the summary requests kept overflowing")


def _rolling_summary(session, provider, lines, budget, summary_tokens, stats, window=None):
    summary = ""
    chunks = list(_chunks(lines, max(200, budget - summary_tokens * CHARS_PER_TOKEN)))
    if len(chunks) > MAX_SUMMARY_REQUESTS:  # keep the newest; the oldest go in one line each
        dropped = len(chunks) - MAX_SUMMARY_REQUESTS
        chunks = chunks[dropped:]
        summary = f"({dropped} older parts of the conversation were dropped unsummarized.)"
    for chunk in chunks:
        parts = []
        if summary:
            parts.append(f"Summary of the conversation before this excerpt:\n{summary}\n")
        parts.append(f"Conversation excerpt:\n{chunk}\n\nWrite the updated summary.")
        summary = _ask(session, provider, "\n".join(parts), summary_tokens, stats, window)
    return summary


def _ask(session, provider, text, max_tokens, stats, window=None):
    """One summary request. The output budget leaves room for a reasoning model's thinking
    (twice the summary, at least 1,024 tokens) but never past the window, which some servers
    check against input plus ``max_tokens``; the text is cut to ``max_tokens`` anyway."""
    messages = [{"role": "user", "content": text}]
    budget = max(2 * max_tokens, 1024)
    if window:
        budget = min(budget, max(max_tokens, window - estimate(SUMMARY_SYSTEM, messages) - 64))
    request = pb.ModelRequest(model=session.model, system=SUMMARY_SYSTEM, messages=messages,
                              tools=[], effort=session.effort,
                              max_output_tokens=budget, purpose="compaction",
                              cache_key=session.id)
    parts = []
    stats[0] += 1
    for item in provider.stream(request):
        kind = type(item)
        if kind is pb.TextDelta:
            parts.append(item.text)
        elif kind is pb.Usage:
            stats[1] += item.input_tokens
            stats[2] += item.output_tokens
        elif kind is pb.Retrying:
            session.emit(ev.Notice(f"msg_{uuid.uuid4().hex[:16]}", retry_text(item)))
    summary = "".join(parts).strip()
    if not summary:
        raise CompactionFailed("compacting failed because the model returned an empty summary")
    cap = max_tokens * CHARS_PER_TOKEN
    return summary if len(summary) <= cap else summary[:cap] + " [...]"


def retry_text(item):
    return f"Retrying in {seconds(item.delay)} s ({item.reason})...\n\n"


# ---------------------------------------------------------------- the turn's side
class ContextGuard:
    """What the turn calls around each model request: compact past the threshold before
    sending, compact and resend (at most twice) when the provider answers an overflow,
    show retries, cap tool results."""

    RESENDS = 2

    def __init__(self, session, provider, settings):
        self.session, self.provider, self.settings = session, provider, settings

    def window(self):
        return window_of(self.session, self.provider, self.settings)

    def messages(self, system, tools=()):
        """The messages of the next request, compacted first when they are too big (the
        tool schemas count: they are sent with every request)."""
        session = self.session
        system = system + schema_text(tools)
        window = self.window()
        size = history_tokens(session, system) if window else 0
        if window and size > THRESHOLD * window:
            try:
                compact(session, self.provider, system, self.settings, "threshold", window)
            except CompactionFailed as exc:
                if size > window:
                    raise
                # still under the window: send it; an overflow would compact again
                log.info("session %s: compaction skipped (%s)", session.id, exc)
        return request_messages(session)

    def stream(self, request):
        """``provider.stream(request)``, with overflow recovery; Retrying, Status and a
        long silence (``wait_notice``) become thoughts."""
        session = self.session
        for attempt in range(self.RESENDS + 1):
            produced = False
            try:
                for item in watch(self.provider.stream(request), self._wait_notice(),
                                  self._thought):
                    kind = type(item)
                    if kind is pb.Retrying:  # a thought: never text of the answer
                        self._thought(retry_text(item))
                        continue
                    if kind is pb.Status:
                        self._thought(item.text)
                        continue
                    produced = True
                    yield item
                forget_window(session, request)
                return
            except ContextOverflow as exc:
                if produced:
                    raise
                system = request.system + schema_text(request.tools)
                learn_window(session, exc, estimate(system, request.messages))
                if attempt == self.RESENDS:
                    raise CompactionFailed(
                        "compacting failed because the request still did not fit the model's "
                        f"context window after {self.RESENDS} compactions ({exc})") from None
                compact(session, self.provider, system, self.settings, "overflow")
                request.messages = request_messages(session)

    def _wait_notice(self):
        return self.settings.wait_notice if self.settings is not None else 0

    def _thought(self, text):
        """A word of the agent's own (a model loading, a long wait): a thought, never text
        of the answer, nor anything the model sees."""
        # its own line: v1 clients join every thought chunk of a turn into one block
        self.session.emit(ev.ThoughtChunk(f"thought_{uuid.uuid4().hex[:16]}", text + "\n"))

    def cap_result(self, text, default):
        return cap_result(text, result_cap(self.window(), default))
