"""Context: how big a request is, how big the model's window is, what of the history is sent.

**Size.** A request is estimated at about 4 characters per token (system prompt, the tool
schemas, and every message's text, thought and tool-call arguments, plus a small
per-message overhead); the first overflow error calibrates the estimate against the
server's own count (see :func:`learn_window`).

**Window.** Learned from the provider's overflow error (the smallest wins, it is what the
server enforces; forgotten when a larger request succeeds later, which proves it a
misreading), else ``context_window`` from the config file (tokens), else what the provider
says (a local model, a script), else the model catalog.

**History views.** What the model is sent of a session's history: from its last
compaction marker on (:func:`resume_view`, :func:`model_messages`), cut only between
*units* (a user message, or an assistant message with all its tool results). Compaction
itself, which writes those markers, is ``turns/compaction.py``.
"""

import json
import logging
import re

log = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD = 16  # characters: role, separators, a provider's framing
THRESHOLD = 0.8  # compact when a request is estimated above this share of the window
RESULT_SHARE = 0.25  # one tool result may use at most this share of the window
MARKER = "compaction"  # the history role of a compaction marker
SUMMARY_HEADER = "[Summary of the earlier conversation, written when it was compacted]"
IMAGE_CHARS = 4000  # what one image is counted as (about 1,000 tokens)


# Only the providers' own wordings: OpenAI's "maximum context length is N tokens ... resulted
# in M tokens" (also "you requested M tokens") and Anthropic's "prompt is too long: M tokens
# > N maximum". Any other number in a message (a request count, a line number) is not a size.
_MAX_RE = re.compile(r"maximum context length is (\d[\d,]*) tokens"
                     r"|tokens > (\d[\d,]*) maximum", re.IGNORECASE)
_USED_RE = re.compile(r"resulted in (\d[\d,]*) tokens|you requested (\d[\d,]*) tokens"
                      r"|too long: (\d[\d,]*) tokens", re.IGNORECASE)
MIN_WINDOW = 512  # tokens: no model has less; a smaller learned window is a misreading
MAX_WINDOW = 100_000_000  # tokens: nor more


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
    configured = settings.context_window if settings is not None else None
    if not configured and provider is not None:
        configured = provider.context_window(session.model)  # e.g. a local model's context
    configured = configured or session.context_window  # the catalog's
    learned = session.window_learned
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
        previous = session.window_learned
        session.window_learned = min(previous, learned) if previous else learned
        log.info("session %s: context window learned from an overflow: %d tokens",
                 session.id, session.window_learned)
    return session.window_learned


def forget_window(session, request):
    """A request larger than the learned window went through: that window was a misreading
    (an error about something else, a count of another kind); forget it."""
    learned = session.window_learned
    if learned:
        sent = estimate(request.system + schema_text(request.tools), request.messages)
        if sent > learned:
            session.window_learned = None
            log.info("session %s: a request of about %d tokens went through; forgetting the "
                     "learned window of %d", session.id, sent, learned)


def schema_text(tools):
    """The tool schemas as a request carries them, for the size estimate. Every model
    round asks with the same spec objects (``Tool.spec`` caches them), so their text is
    kept for the last few lists seen (the entry holds the specs: no id is reused)."""
    if not tools:
        return ""
    key = tuple(map(id, tools))
    known = _SCHEMAS.get(key)
    if known is not None:
        return known[1]
    text = json.dumps(tools, separators=(",", ":"))
    if len(_SCHEMAS) >= _SCHEMAS_KEPT:
        _SCHEMAS.pop(next(iter(_SCHEMAS)))
    _SCHEMAS[key] = (tuple(tools), text)
    return text


_SCHEMAS = {}  # ids of a list of specs -> (those specs, their text)
_SCHEMAS_KEPT = 16


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
    cached = session.context_size
    count = len(history)
    if cached is not None and cached[0] is history and cached[1] <= count and (
            cached[1] == 0 or history[cached[1] - 1] is cached[2]):
        chars = cached[3] + sum(map(message_chars, history[cached[1]:]))
    else:
        chars = sum(map(message_chars, history))
    session.context_size = (history, count, history[-1] if history else None, chars)
    return tokens_of_chars(len(system or "") + chars)


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


def unit_tokens(unit):
    return tokens_of_chars(sum(map(message_chars, unit)))


def restore(session, history):
    """Set a resumed session's model-facing history (from its last compaction) and the
    window learned before it."""
    view = resume_view(history)
    session.history = view
    if view and is_marker(view[0]) and sane_window(view[0].get("window")):
        session.window_learned = view[0]["window"]  # a stored misreading is not restored
    return view
