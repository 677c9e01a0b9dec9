"""Errors a person can see: what a failed turn tells the user, as an agent message.

The stop reason and ``_meta`` (v2) or the prompt's JSON-RPC error (v1) stay as they were;
this text comes in addition, because editors show agent messages and often nothing else.
It says what happened and what to do, never an API key (provider messages are scrubbed
where they are made).
"""

import re

from term2acp.core import secrets
from term2acp.providers import errors as pe

_RETRY_AFTER = re.compile(r"retry(?:ing)? (?:after|in) (\d+(?:\.\d+)?)\s*s", re.IGNORECASE)


BASE_URL_VARS = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}


def base_url_hint(provider):
    """Where the base URL of ``provider`` (its name) is set."""
    if provider in BASE_URL_VARS:
        return BASE_URL_VARS[provider]
    return f"base_url of [providers.{provider}]" if provider else "e.g. OPENAI_BASE_URL"


def explain(exc, provider=None):
    """The user-facing text for an exception that ended a turn (``provider``: the name of
    the session's provider, which the advice names)."""
    text = secrets.mask(str(exc).strip()) or type(exc).__name__
    # CompactionFailed lives in turns/compaction.py, which imports this module: matched by name
    if type(exc).__name__ == "CompactionFailed":
        return (f"The conversation no longer fits the model's context window, and {text}. "
                "Start a new session, or send a shorter prompt.")
    if type(exc).__name__ in ("StoreError", "StoreRecovered"):  # sessions/errors.py
        return _store_advice(text)
    if isinstance(exc, pe.ProviderNotConfigured):
        return f"No model is available: {text}"
    if isinstance(exc, pe.AuthenticationFailed):
        return (f"The model provider rejected the API key ({text}). Check that the key is "
                "set and valid in the agent's environment, then try again.")
    if isinstance(exc, pe.RateLimited):
        after = getattr(exc, "retry_after", None)
        if after is None:
            match = _RETRY_AFTER.search(text)
            after = float(match.group(1)) if match else None
        when = f"retry after {seconds(after)} s" if after else "wait a moment and retry"
        return (f"The model provider is rate limiting requests ({text}); the retries ran out. "
                f"Please {when}.")
    if isinstance(exc, pe.ContextOverflow):
        return (f"The request did not fit the model's context window ({text}) and compacting "
                "did not help. Start a new session, or send a shorter prompt.")
    if isinstance(exc, pe.ConnectionFailed):
        return (f"Could not reach the model provider: {text}. Check the network, the "
                f"server and the base URL ({base_url_hint(provider)}), then try again.")
    if isinstance(exc, pe.MalformedResponse):
        return f"The model provider sent a response term2 could not read: {text}."
    if isinstance(exc, pe.ProviderHTTPError):
        return f"The model provider returned an error: {text}. Try again, or check the model id."
    if isinstance(exc, pe.ProviderError):
        return f"The model provider failed: {text}."
    return (f"term2 hit an internal error ({type(exc).__name__}) and stopped this turn; the "
            "details are in the agent's log (stderr). Try again.")


def _store_advice(text):
    """What a session store failure means and what to do about it."""
    lowered = text.lower()
    if "full" in lowered or "no space" in lowered:
        what = ("the disk holding it is full. Free some space there (see the path in the "
                "agent's log, or TERM2ACP_HOME), then send the prompt again")
    elif "locked" in lowered or "busy" in lowered:
        what = ("another term2-acp process kept it locked longer than store_busy_timeout. "
                "Close the other agent or wait for it, then send the prompt again")
    else:
        what = "check the disk and the store file, then send the prompt again"
    return (f"The session store could not save this turn ({text}): {what}. What the turn "
            "did so far is not all saved.")


def seconds(value):
    """``12`` or ``0.5``: a delay as people write it."""
    return f"{value:.0f}" if value >= 10 else f"{value:.1f}".rstrip("0").rstrip(".")


def message(exc, provider=None):
    """The agent message: the explanation set apart from any partial answer."""
    return f"\n\n**Error:** {explain(exc, provider)}\n"
