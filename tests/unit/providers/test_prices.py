"""Request costs from the price table (providers/prices.py)."""

import pytest

from term2acp.providers.base import Usage
from term2acp.providers.prices import cost, price_of


def test_cache_reads_and_writes_are_priced_apart():
    usage = Usage(input_tokens=1_000_000, cached_tokens=600_000, cache_write_tokens=300_000,
                  output_tokens=100_000)
    # claude-sonnet-4-5: 3 in, 0.30 read, 3.75 write, 15 out (USD per million)
    assert cost("claude-sonnet-4-5", usage) == pytest.approx(0.3 + 0.18 + 1.125 + 1.5)
    # the one-hour cache writes at twice the input price
    assert cost("claude-sonnet-4-5", usage, long_cache=True) == pytest.approx(
        0.3 + 0.18 + 1.8 + 1.5)


def test_dated_ids_aliases_unknown_models_and_overrides():
    assert price_of("claude-sonnet-4-5-20250929") == price_of("claude-sonnet-4-5")
    assert price_of("gpt-4.1-2025-04-14") == price_of("gpt-4.1")
    assert price_of("my-local-model") is None
    assert cost("my-local-model", Usage(input_tokens=10)) is None
    mine = {"my-local-model": {"input": 1, "output": 2}, "gpt-4.1": {"input": 9, "output": 9,
                                                                       "cache_read": 1}}
    assert price_of("my-local-model", mine) == (1.0, 1.0, 1.0, 2.0)
    assert price_of("gpt-4.1", mine) == (9.0, 1.0, 9.0, 9.0)
    assert price_of("gpt-4.1", {"gpt-4.1": {"input": "cheap"}}) == price_of("gpt-4.1")
