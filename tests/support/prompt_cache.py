"""What a model server's prompt cache would make of recorded requests: bytes, shared
prefixes, cache reads and writes, and input cost as sent against an ideal prefix cache.

A request is flattened into *blocks* in the order the provider's cache sees it (tools,
then the system prompt, then each message's content blocks; ``cache_control`` markers are
taken out of the bytes and kept as breakpoints). Tokens are estimated at 4 bytes each.

* :class:`AnthropicCache` follows Anthropic's documented rules: only prefixes ending at a
  ``cache_control`` breakpoint are written (at the write price), a request reads the
  longest cached prefix ending at a breakpoint or at one of the 20 blocks before one, and
  prefixes under the model's minimum (1,024 tokens) are never cached.
* :class:`OpenAICache` follows OpenAI's automatic caching: any prefix of an earlier
  request of at least 1,024 tokens is read, in 128-token steps; nothing costs extra to
  write.
* The *ideal* cost reads the longest prefix shared with any earlier request and pays the
  rest at the write price (Anthropic; what must be written to be read later) or the
  input price (OpenAI).
"""

import hashlib
import json

BYTES_PER_TOKEN = 4
MIN_CACHED_TOKENS = 1024
LOOKBACK = 20
# USD per million tokens: (input, cache read, cache write); the benchmark's reference
# prices (claude-sonnet-4-5 and gpt-4.1-mini list prices)
PRICES = {"anthropic": (3.0, 0.30, 3.75), "openai": (0.40, 0.10, 0.40)}


def _bytes(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def _strip(value):
    """``(value without cache_control, True if it had one)``."""
    if isinstance(value, dict) and "cache_control" in value:
        return {k: v for k, v in value.items() if k != "cache_control"}, True
    return value, False


def blocks_of(kind, body):
    """``[(bytes, breakpoint)]`` of a request body in the provider's cache order."""
    out = []
    for tool in body.get("tools") or ():
        tool, mark = _strip(tool)
        out.append((b"T" + _bytes(tool), mark))
    if kind == "anthropic":
        system = body.get("system")
        if isinstance(system, str):
            out.append((b"S" + system.encode(), False))
        for block in system or () if isinstance(system, list) else ():
            block, mark = _strip(block)
            out.append((b"S" + _bytes(block), mark))
        messages = body.get("messages") or ()
    elif kind == "responses":
        if body.get("instructions"):
            out.append((b"S" + body["instructions"].encode(), False))
        messages = body.get("input") or ()
    else:
        messages = body.get("messages") or ()
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if kind == "anthropic" and isinstance(content, list):
            role = message.get("role", "").encode()
            for block in content:
                block, mark = _strip(block)
                out.append((b"M" + role + _bytes(block), mark))
        else:
            message, mark = _strip(message)
            out.append((b"M" + _bytes(message), mark))
    return out


def flat(blocks):
    return b"".join(data for data, _ in blocks)


def common_prefix(a, b):
    """Length of the longest common prefix of two byte strings (binary search on slices)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def tokens(nbytes):
    return nbytes // BYTES_PER_TOKEN


class AnthropicCache:
    def __init__(self):
        self.entries = set()  # digests of cached prefixes

    def charge(self, blocks):
        """``(read, written, uncached)`` tokens of one request; updates the cache."""
        ends, digests, digest, size = [], [], hashlib.sha256(), 0
        for data, _ in blocks:
            digest.update(data)
            size += len(data)
            ends.append(size)
            digests.append(digest.copy().hexdigest())
        marks = [i for i, (_, mark) in enumerate(blocks) if mark]
        read = 0
        for mark in marks:
            for index in range(mark, max(-1, mark - LOOKBACK), -1):
                if digests[index] in self.entries:
                    read = max(read, ends[index])
                    break
        cacheable = [i for i in marks if tokens(ends[i]) >= MIN_CACHED_TOKENS]
        written_to = max((ends[i] for i in cacheable), default=0)
        for index in cacheable:
            self.entries.add(digests[index])
        read_t, total_t = tokens(read), tokens(size)
        written_t = max(0, tokens(written_to) - read_t)
        return read_t, written_t, total_t - read_t - written_t


class OpenAICache:
    def __init__(self):
        self.seen = []

    def charge(self, blocks):
        data = flat(blocks)
        shared = max((common_prefix(data, old) for old in self.seen), default=0)
        self.seen.append(data)
        shared_t = tokens(shared)
        read = 0 if shared_t < MIN_CACHED_TOKENS else \
            MIN_CACHED_TOKENS + (shared_t - MIN_CACHED_TOKENS) // 128 * 128
        return read, 0, tokens(len(data)) - read


class Row:
    __slots__ = ("number", "kind", "sent", "size", "shared", "read", "written", "uncached",
                 "cost", "ideal", "cache_key", "model")


class Ledger:
    """Every request a fake server answered, with what the cache made of it."""

    def __init__(self, provider):
        self.provider = provider  # anthropic | openai (prices, cache rules)
        self.cache = AnthropicCache() if provider == "anthropic" else OpenAICache()
        self.rows = []
        self._previous = None
        self._earlier = []

    def record(self, kind, raw_body):
        """Account one request (``kind``: anthropic | chat | responses); returns its row."""
        body = json.loads(raw_body)
        blocks = blocks_of(kind, body)
        data = flat(blocks)
        row = Row()
        row.number, row.kind, row.sent, row.size = len(self.rows) + 1, \
            "turn" if body.get("tools") else "summary", len(raw_body), len(data)
        row.cache_key, row.model = body.get("prompt_cache_key"), body.get("model")
        row.shared = common_prefix(data, self._previous) / len(self._previous) \
            if self._previous else None
        row.read, row.written, row.uncached = self.cache.charge(blocks)
        price, read_price, write_price = PRICES[self.provider]
        row.cost = (row.read * read_price + row.written * write_price
                    + row.uncached * price) / 1e6
        best = tokens(max((common_prefix(data, old) for old in self._earlier), default=0))
        rest_price = write_price if self.provider == "anthropic" else price
        row.ideal = (best * read_price + (tokens(len(data)) - best) * rest_price) / 1e6
        self._previous = data
        self._earlier.append(data)
        self.rows.append(row)
        return row

    def totals(self):
        return sum(r.cost for r in self.rows), sum(r.ideal for r in self.rows)

    def table(self):
        lines = [f"{'#':>3} {'kind':<8}{'bytes':>9} {'shared':>7} {'read':>7} {'write':>7} "
                 f"{'fresh':>7} {'cost $':>9} {'ideal $':>9}"]
        for r in self.rows:
            shared = "-" if r.shared is None else f"{100 * r.shared:.0f} %"
            lines.append(f"{r.number:>3} {r.kind:<8}{r.sent:>9,} {shared:>7} {r.read:>7,} "
                         f"{r.written:>7,} {r.uncached:>7,} {r.cost:>9.5f} {r.ideal:>9.5f}")
        cost, ideal = self.totals()
        lines.append(f"input cost as sent ${cost:.5f}, ideal ${ideal:.5f}: "
                     f"{cost / ideal:.2f}x the ideal" if ideal else "no requests")
        return "\n".join(lines)
