"""What a model request cost, from a price table (the ``cost`` of ``usage_update``).

Prices are USD per million tokens: ``(input, cache read, cache write, output)``. Source:
the providers' published price lists (Anthropic's and OpenAI's pricing pages), as
collected in the ``genai-prices`` package 0.2.3 (November 2026), checked model by model.
That package itself is not a dependency: it imports pydantic and an HTTP client on the
first turn for a lookup this table does in microseconds. Long-context
surcharges (prompts past 200k or 272k tokens on a few models) are not applied.

Anthropic writes to its cache at 1.25 times the input price (2 times for the one-hour
cache), OpenAI at no premium. A web search the provider runs (``Usage.web_searches``)
costs USD 10 per thousand at both (Anthropic's web search tool; OpenAI's ``web_search``
tool), besides the tokens of its results. A model without a price shows tokens only. The config file
sets or overrides prices::

    [prices."my-model"]
    input = 1.0          # USD per million input tokens
    output = 4.0
    cache_read = 0.1     # optional: default the input price
    cache_write = 1.25   # optional: default the input price
"""

import re

from term2acp.providers.catalog import canonical

SEARCH_USD = 0.01  # one web search by the provider (USD 10 per 1,000)
PRICES = {
    # Anthropic
    "claude-opus-5": (5.0, 0.50, 6.25, 25.0),
    "claude-sonnet-5": (2.0, 0.20, 2.50, 10.0),
    "claude-opus-4-5": (5.0, 0.50, 6.25, 25.0),
    "claude-opus-4-1": (15.0, 1.50, 18.75, 75.0),
    "claude-opus-4-0": (15.0, 1.50, 18.75, 75.0),
    "claude-sonnet-4-5": (3.0, 0.30, 3.75, 15.0),
    "claude-sonnet-4-0": (3.0, 0.30, 3.75, 15.0),
    "claude-haiku-4-5": (1.0, 0.10, 1.25, 5.0),
    "claude-3-7-sonnet": (3.0, 0.30, 3.75, 15.0),
    "claude-3-5-haiku": (0.8, 0.08, 1.0, 4.0),
    # OpenAI
    "gpt-5.2": (1.75, 0.175, 1.75, 14.0),
    "gpt-5.1": (1.25, 0.125, 1.25, 10.0),
    "gpt-5": (1.25, 0.125, 1.25, 10.0),
    "gpt-5-mini": (0.25, 0.025, 0.25, 2.0),
    "gpt-5-nano": (0.05, 0.005, 0.05, 0.4),
    "gpt-4.1": (2.0, 0.50, 2.0, 8.0),
    "gpt-4.1-mini": (0.40, 0.10, 0.40, 1.6),
    "gpt-4.1-nano": (0.10, 0.025, 0.10, 0.4),
    "gpt-4o": (2.5, 1.25, 2.5, 10.0),
    "gpt-4o-mini": (0.15, 0.075, 0.15, 0.6),
    "o3": (2.0, 0.50, 2.0, 8.0),
    "o4-mini": (1.1, 0.275, 1.1, 4.4),
    # Google (prompts up to 200k tokens; cache storage per hour is not counted)
    "gemini-3-pro-preview": (2.0, 0.20, 2.0, 12.0),
    "gemini-3-flash-preview": (0.50, 0.05, 0.50, 3.0),
    "gemini-2.5-pro": (1.25, 0.125, 1.25, 10.0),
    "gemini-2.5-flash": (0.30, 0.03, 0.30, 2.50),
    "gemini-2.5-flash-lite": (0.10, 0.01, 0.10, 0.40),
}
# Dated snapshots and aliases name the same model: claude-sonnet-4-5-20250929,
# gpt-4.1-2025-04-14, claude-3-7-sonnet-latest.
_SUFFIX = re.compile(r"(-\d{8}|-\d{4}-\d{2}-\d{2}|-latest)$")


def price_of(model, overrides=None):
    """``(input, cache read, cache write, output)`` USD per million tokens, or None."""
    overrides = overrides or {}
    plain = canonical(model)  # a cloud's name of the model (Bedrock, Vertex)
    for name in dict.fromkeys((model, _SUFFIX.sub("", model or ""), plain,
                               _SUFFIX.sub("", plain))):
        custom = overrides.get(name)
        if isinstance(custom, dict) and _number(custom.get("input")) is not None \
                and _number(custom.get("output")) is not None:
            base = _number(custom["input"])
            read = _number(custom.get("cache_read"))
            write = _number(custom.get("cache_write"))
            return (base, base if read is None else read, base if write is None else write,
                    _number(custom["output"]))
        if name in PRICES:
            return PRICES[name]
    return None


def cost(model, usage, overrides=None, long_cache=False):
    """USD of one request (``usage``: providers.base.Usage), or None without a price.
    ``long_cache``: Anthropic's one-hour cache, written at twice the input price."""
    price = price_of(model, overrides)
    if price is None:
        return None
    base, read, write, output = price
    if long_cache and write != base:
        write = 2 * base
    cached, written = usage.cached_tokens or 0, usage.cache_write_tokens or 0
    fresh = max(0, (usage.input_tokens or 0) - cached - written)
    return (fresh * base + cached * read + written * write
            + (usage.output_tokens or 0) * output) / 1e6 \
        + SEARCH_USD * (getattr(usage, "web_searches", 0) or 0)


def _number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        return None
    return float(value)
