"""Provider errors (cheap to import: the protocol layer maps them to JSON-RPC errors).

Every failure of a model API is a :class:`ProviderError` whose message is safe to show
(never an API key). The subclasses let callers react to the kind of failure without
parsing text: an authentication failure, a rate limit that outlived the retries, a
prompt too long for the model's context window, any other HTTP status (``status`` holds
it), a transport failure (the URL is in the message), or a stream the client could not
decode.
"""

import re

MESSAGE_LIMIT = 300  # characters of a server's error message kept in ours
PLACEHOLDER_KEY = "not-needed"  # what a keyless loopback server receives

# How servers say "the prompt does not fit": OpenAI's code, llama.cpp server's type, and the
# messages of Anthropic, vLLM, LM Studio and OpenRouter.
OVERFLOW_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error",
                            "string_above_max_length"})
OVERFLOW_TEXT = (r"context.length|context.window|maximum context|prompt is too long"
                 r"|context size|input length and .max_tokens. exceed|input is too long")


class ProviderError(Exception):
    """A provider failure with a user-safe message (auth, network, bad response)."""


class ProviderNotConfigured(ProviderError):
    """Raised at preparation time: tells the user exactly what to set."""


class ProviderHTTPError(ProviderError):
    """The API answered with an error status (or an error event inside the stream: 200)."""

    def __init__(self, message, status, code=None):
        super().__init__(message)
        self.status = status
        self.code = code


class AuthenticationFailed(ProviderHTTPError):
    """401/403: the message names the variable that holds the key."""


class RateLimited(ProviderHTTPError):
    """429 (or an overload status) that was still there after the last retry."""


class ContextOverflow(ProviderHTTPError):
    """The prompt is larger than the model's context window (compaction may help)."""


class ConnectionFailed(ProviderError):
    """The server could not be reached, or the connection broke mid-stream."""


class MalformedResponse(ProviderError):
    """The stream could not be decoded (bad JSON, bad framing)."""


# ---------------------------------------------------------------- message helpers
def server_message(body, fallback):
    """The human part of an API error body, shortened."""
    inner = body.get("error", body) if isinstance(body, dict) else body
    message = inner.get("message") if isinstance(inner, dict) else inner
    text = message if isinstance(message, str) and message else fallback
    return text[:MESSAGE_LIMIT]


def error_code(body):
    """The machine-readable code of an API error body (``code`` or ``type``), if any."""
    inner = body.get("error", body) if isinstance(body, dict) else None
    if not isinstance(inner, dict):
        return None
    code = inner.get("code") or inner.get("type")
    if not isinstance(code, str):  # Google's shape: its ErrorInfo's reason, else its status
        details = inner.get("details") if isinstance(inner.get("details"), list) else ()
        code = next((d["reason"] for d in details if isinstance(d, dict)
                     and isinstance(d.get("reason"), str)), None) or inner.get("status")
    return code if isinstance(code, str) else None


def is_overflow(status, body):
    if status not in (400, 413, 200):
        return False
    if error_code(body) in OVERFLOW_CODES:
        return True
    return bool(re.search(OVERFLOW_TEXT, server_message(body, ""), re.IGNORECASE))


def scrub(text, secret):
    if not secret or secret == PLACEHOLDER_KEY or len(secret) < 8:
        return text
    return text.replace(secret, "***")
