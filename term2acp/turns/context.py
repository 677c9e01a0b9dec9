"""Context management: how big a request is, how big the model's window is, compaction.

**Size.** A request is estimated at about 4 characters per token (system prompt and every
message's text, thought and tool-call arguments, plus a small per-message overhead). Tool
schemas are not counted: the 20 % headroom under the window covers them, and the first
overflow error calibrates the estimate against the server's own count (see
:func:`learn_window`).

**Window.** Learned from the provider's overflow error (the smallest wins, it is what the
server enforces), else ``context_window`` from the config file (tokens), else what the
provider says (a local model, a script), else the model catalog.

**Compaction.** Past :data:`THRESHOLD` of the window before a model request, or when the
provider answers an overflow, the older part of the conversation is summarized by the model
and the summary replaces it in what is sent. Kept intact: the system prompt and project
instructions (they are not history), and the most recent exchanges; history is cut only
between *units* (a user message, or an assistant message together with all its tool
results), so a tool call is never separated from its result. In the store the full
history stays; a ``{"role": "compaction"}`` marker followed by copies of the kept messages
is appended, and a resumed session continues from the last marker
(:func:`resume_view`). The journal gets a ``compaction`` record for replay.

:func:`compact` is the entry point for both the turn and the ``/compact`` command.
"""

import logging
import re
import time
import uuid

import gevent

from term2acp.turns import image_budget
from term2acp.turns.waiting import watch
from term2acp.core import events as ev
from term2acp.providers import base as pb
from term2acp.providers.errors import ContextOverflow, ProviderError

log = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD = 16  # characters: role, separators, a provider's framing
THRESHOLD = 0.8  # compact when a request is estimated above this share of the window
KEEP_SHARE = 0.5  # of the room under the threshold, what the kept recent exchanges may use
SUMMARY_SHARE = 0.25  # of that room, the summary's budget (tokens)
SUMMARY_MIN, SUMMARY_MAX = 64, 2000  # tokens a summary may use
RESULT_SHARE = 0.25  # one tool result may use at most this share of the window
CHUNK_SHARE = 0.6  # of the window, what one summarization request may carry
TRANSCRIPT_TEXT_CAP = 2000  # characters of one message in the summarizer's transcript
TRANSCRIPT_RESULT_CAP = 600  # characters of one tool result there
MAX_SUMMARY_REQUESTS = 16
MARKER = "compaction"  # the history role of a compaction marker
IMAGE_CHARS = 4000  # what one image is counted as (about 1,000 tokens)

SUMMARY_SYSTEM = (
    "You compact coding-agent conversations. Write a concise summary of the conversation "
    "excerpt you are given, for the same agent to continue the work: the user's goals and "
    "requests (quote the latest request), decisions made, files read or changed (with paths), "
    "commands run and their outcomes, errors, and what remains to do. Plain text, no preamble.")
SUMMARY_HEADER = "[Summary of the earlier conversation, written when it was compacted]"

# Only the providers' own wordings: OpenAI's "maximum context length is N tokens ... resulted
# in M tokens" (also "you requested M tokens") and Anthropic's "prompt is too long: M tokens
# > N maximum". Any other number in a message (a request count, a line number) is not a size.
_MAX_RE = re.compile(r"maximum context length is (\d[\d,]*) tokens"
                     r"|tokens > (\d[\d,]*) maximum", re.IGNORECASE)
_USED_RE = re.compile(r"resulted in (\d[\d,]*) tokens|you requested (\d[\d,]*) tokens"
                      r"|too long: (\d[\d,]*) tokens", re.IGNORECASE)
MIN_WINDOW = 512  # tokens: no model has less; a smaller learned window is a misreading
MAX_WINDOW = 100_000_000  # tokens: nor more


class CompactionFailed(ProviderError):
    """Compaction could not make the conversation fit; the message says why (user-facing)."""


class Compacted:
    """What one compaction did (for /compact's answer and the bench)."""

    __slots__ = ("compaction_id", "summary", "before", "after", "folded", "kept", "requests",
                 "input_tokens", "output_tokens", "seconds")

    def __init__(self, **fields):
        for name in self.__slots__:
            setattr(self, name, fields.get(name))


# ---------------------------------------------------------------- size
def message_chars(message):
    size = MESSAGE_OVERHEAD + len(message.get("content") or "") + len(message.get("thought") or "")
    size += len(message.get("summary") or "")
    size += IMAGE_CHARS * len(message.get("images") or ())
    for call in message.get("tool_calls") or ():
        size += len(call.get("name") or "") + len(call.get("arguments") or "") + MESSAGE_OVERHEAD
    if message.get("replay"):
        size += search_chars(message["replay"])
    return size


def search_chars(replay):
    """The web search results an answer carries back (Anthropic's): the provider reads each
    result's text again in every later request, and its encrypted form is about as long."""
    size = 0
    for item in replay.get("items") or () if isinstance(replay, dict) else ():
        results = item.get("content") if isinstance(item, dict) \
            and item.get("type") == "web_search_tool_result" else None
        if isinstance(results, list):
            size += sum(len(r.get("encrypted_content") or "") + len(r.get("title") or "")
                        for r in results if isinstance(r, dict))
    return size


def tokens_of_chars(chars):
    return -(-chars // CHARS_PER_TOKEN)


def estimate(system, messages):
    """Estimated tokens of a request (system prompt and messages)."""
    return tokens_of_chars(len(system or "") + sum(map(message_chars, messages)))


def window_of(session, provider=None, settings=None):
    """The context window in tokens (None: unknown)."""
    configured = getattr(settings, "context_window", None)
    if not configured and provider is not None:
        configured = provider.context_window(session.model)  # e.g. a local model's context
    configured = configured or session.context_window  # the catalog's
    learned = getattr(session, "window_learned", None)
    if learned and configured:
        return min(learned, configured)
    return learned or configured or None


def learn_window(session, error, sent_estimate):
    """Learn the window from an overflow error: the server's maximum, scaled by how far our
    estimate was from the server's own count when it says it (so a server that counts tool
    schemas, or counts differently, calibrates us); else 90 % of what was refused."""
    text = str(error)
    maximum = _plausible(_number(_MAX_RE, text))
    used = _plausible(_number(_USED_RE, text))
    if maximum and used and used > maximum and sent_estimate:
        learned = int(maximum * sent_estimate / used)
    elif maximum and sent_estimate:
        learned = min(maximum, int(sent_estimate * 0.9))
    else:
        learned = int(sent_estimate * 0.9) if sent_estimate else None
    if learned:
        learned = max(MIN_WINDOW, learned)
        previous = getattr(session, "window_learned", None)
        session.window_learned = min(previous, learned) if previous else learned
        log.info("session %s: context window learned from an overflow: %d tokens",
                 session.id, session.window_learned)
    return getattr(session, "window_learned", None)


def sane_window(value):
    """``value`` when it can be a context window in tokens, else None."""
    return _plausible(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _plausible(tokens):
    return tokens if tokens is not None and MIN_WINDOW <= tokens <= MAX_WINDOW else None


def _number(pattern, text):
    for match in pattern.finditer(text):
        for group in match.groups():
            if group:
                return int(group.replace(",", ""))
    return None


def history_tokens(session, system):
    """:func:`estimate` of the session's history, incremental: the history only grows by
    appends between compactions, so only messages added since the last call are measured
    (a replaced or rewritten list is measured again in full)."""
    history = session.history
    cached = getattr(session, "_context_size", None)
    count = len(history)
    if cached is not None and cached[0] is history and cached[1] <= count and (
            cached[1] == 0 or history[cached[1] - 1] is cached[2]):
        chars = cached[3] + sum(map(message_chars, history[cached[1]:]))
    else:
        chars = sum(map(message_chars, history))
    session._context_size = (history, count, history[-1] if history else None, chars)
    return tokens_of_chars(len(system or "") + chars)


def over_threshold(system, messages, window):
    return bool(window) and estimate(system, messages) > THRESHOLD * window


def result_cap(window, default):
    """Characters of one tool result the model may receive."""
    if not window:
        return default
    return max(2000, min(default, int(window * RESULT_SHARE * CHARS_PER_TOKEN)))


def cap_result(text, cap):
    """A tool result cut to ``cap`` characters, with a note saying so."""
    if len(text) <= cap:
        return text
    note = (f"\n[... output truncated: {cap:,} of {len(text):,} characters shown, to fit the "
            "model's context window; ask for a narrower range or a filtered output ...]")
    return text[:max(0, cap - len(note))] + note


# ---------------------------------------------------------------- history views
def is_marker(message):
    return isinstance(message, dict) and message.get("role") == MARKER


def resume_view(history):
    """The model-facing conversation of a stored history: from the last compaction marker."""
    for index in range(len(history) - 1, -1, -1):
        if is_marker(history[index]):
            return history[index:]
    return history


def model_messages(history):
    """The messages a provider receives: a marker becomes the summary, merged into the
    user message after it (providers want user/assistant turns, not two user messages)."""
    if not history or not is_marker(history[0]):
        return list(history)  # a marker only ever leads a view (resume_view, compact)
    out = []
    for message in history:
        if not is_marker(message):
            if out and out[-1].get("_summary") and message.get("role") == "user":
                merged = dict(message, content=out[-1]["content"] + "\n\n" + message["content"])
                out[-1] = merged
            else:
                out.append(message)
            continue
        text = f"{SUMMARY_HEADER}\n{message.get('summary') or ''}"
        out.append({"role": "user", "content": text, "_summary": True})
    return [_clean(m) for m in out]


def _clean(message):
    if "_summary" in message:
        message = {k: v for k, v in message.items() if k != "_summary"}
    return message


def units(history):
    """The history cut where cutting is safe: each unit is a user message, a marker, or an
    assistant message with the tool results that follow it."""
    out = []
    for message in history:
        if message.get("role") == "tool" and out and out[-1][0].get("role") == "assistant":
            out[-1].append(message)
        else:
            out.append([message])
    return out


def _unit_tokens(unit):
    return tokens_of_chars(sum(map(message_chars, unit)))


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
              "window": getattr(session, "window_learned", None)}
    kept = [message for unit in keep for message in unit]
    store = getattr(session, "store_history", None)  # counts the session's stored rows
    for message in [marker] + kept:
        if store is not None:
            store(message)
        else:
            session.store.append_history(session.id, message)
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
        size = _unit_tokens(unit)
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
                              tools=[], effort=getattr(session, "effort", "default"),
                              max_output_tokens=budget, purpose="compaction",
                              cache_key=getattr(session, "id", None))
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
    from term2acp.turns.failures import seconds

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

    def messages(self, system):
        """The messages of the next request, compacted first when they are too big."""
        session = self.session
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
        return image_budget.bound(model_messages(session.history))

    def stream(self, request):
        """``provider.stream(request)``, with overflow recovery; Retrying becomes a notice,
        Status and a long silence (``wait_notice``) a thought."""
        session = self.session
        for attempt in range(self.RESENDS + 1):
            produced = False
            try:
                for item in watch(self.provider.stream(request), self._wait_notice(),
                                  self._thought):
                    kind = type(item)
                    if kind is pb.Retrying:
                        session.emit(ev.Notice(f"msg_{uuid.uuid4().hex[:16]}", retry_text(item)))
                        continue
                    if kind is pb.Status:
                        self._thought(item.text)
                        continue
                    produced = True
                    yield item
                return
            except ContextOverflow as exc:
                if produced:
                    raise
                sent = estimate(request.system, request.messages)
                learn_window(session, exc, sent)
                if attempt == self.RESENDS:
                    raise CompactionFailed(
                        "compacting failed because the request still did not fit the model's "
                        f"context window after {self.RESENDS} compactions ({exc})") from None
                compact(session, self.provider, request.system, self.settings, "overflow")
                request.messages = image_budget.bound(model_messages(session.history))

    def _wait_notice(self):
        return self.settings.wait_notice if self.settings is not None else 0

    def _thought(self, text):
        """A word of the agent's own (a model loading, a long wait): a thought, never text
        of the answer, nor anything the model sees."""
        # its own line: v1 clients join every thought chunk of a turn into one block
        self.session.emit(ev.ThoughtChunk(f"thought_{uuid.uuid4().hex[:16]}", text + "\n"))

    def cap_result(self, text, default):
        return cap_result(text, result_cap(self.window(), default))


def restore(session, history):
    """Set a resumed session's model-facing history (from its last compaction) and the
    window learned before it."""
    view = resume_view(history)
    session.history = view
    if view and is_marker(view[0]) and sane_window(view[0].get("window")):
        session.window_learned = view[0]["window"]  # a stored misreading is not restored
    return view
