"""What a failed turn tells the user (turns/failures.py)."""

import pytest

from term2acp.turns import failures
from term2acp.turns.compaction import CompactionFailed
from term2acp.providers import errors as pe


def limited(after):
    exc = pe.RateLimited("openai: HTTP 429: slow down", 429)
    exc.retry_after = after
    return exc


@pytest.mark.parametrize("exc, words", [
    (pe.ProviderNotConfigured("openai: no API key: set OPENAI_API_KEY"), ["OPENAI_API_KEY"]),
    (pe.AuthenticationFailed("openai: authentication failed (check OPENAI_API_KEY)", 401),
     ["rejected the API key", "OPENAI_API_KEY"]),
    (limited(12.0), ["rate limiting", "retry after 12 s"]),
    (limited(None), ["rate limiting", "wait a moment"]),
    (pe.ConnectionFailed("openai: cannot reach http://h:1/v1/chat/completions: refused"),
     ["Could not reach", "http://h:1/v1/chat/completions"]),
    (CompactionFailed("compacting failed because the summary request failed: boom"),
     ["no longer fits", "compacting failed because the summary request failed"]),
    (pe.ProviderHTTPError("openai: HTTP 500: oops", 500), ["returned an error", "HTTP 500"]),
    (KeyError("x"), ["internal error (KeyError)", "stderr"]),
])
def test_each_failure_says_what_happened_and_what_to_do(exc, words):
    text = failures.message(exc)
    assert text.startswith("\n\n**Error:** ")
    for word in words:
        assert word in text


def test_seconds_read_like_people_write_them():
    assert [failures.seconds(v) for v in (0.25, 1.0, 2.5, 30.4)] == ["0.2", "1", "2.5", "30"]


@pytest.mark.parametrize("provider, named", [("anthropic", "ANTHROPIC_BASE_URL"),
                                             ("openai", "OPENAI_BASE_URL"),
                                             ("ollama", "base_url of [providers.ollama]")])
def test_an_unreachable_provider_names_its_own_base_url(provider, named):
    from term2acp.providers import errors as pe
    from term2acp.turns.failures import explain

    text = explain(pe.ConnectionFailed("connection refused"), provider)
    assert named in text and (provider == "openai" or "OPENAI_BASE_URL" not in text)
