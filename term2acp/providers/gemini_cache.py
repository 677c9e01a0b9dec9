"""Gemini's explicit context cache (``[providers.gemini] context_cache = "explicit"``).

One ``cachedContents`` entry per session (``ModelRequest.cache_key``) holds the system
instruction, the tool list and the settled history (every turn but the newest); a
request that starts with exactly that names it (``cachedContent``) and sends only the
turns after it, without the system instruction and tools the entry already holds.

The entry is made again, and the old one deleted, when what it holds is no longer the
start of the request (a compaction or an ``/undo`` rewrote the history) or when the turns
sent after it outnumber the ones it holds (so a long session makes a logarithmic number of
entries). It lives ``TTL`` seconds and is renewed (``PATCH`` of its ``ttl``) when a request
comes within ``RENEW_BEFORE`` of its end; the provider's ``close`` (the session released)
deletes them all. The server refuses an entry under its minimum size (about a thousand
tokens): the request then goes as it is, and the entry is tried again once the history
has doubled. Any other failure to make one is logged and the session goes on with the
implicit cache only.
"""

import hashlib
import json
import logging
import time
from urllib.parse import quote

from term2acp.providers.errors import ProviderError, ProviderHTTPError

log = logging.getLogger(__name__)

TTL = 600  # seconds an entry lives
RENEW_BEFORE = 120  # renewed when a request comes this close to its end
TIMEOUT = 15.0


class _Entry:
    __slots__ = ("name", "digest", "covered", "expires")

    def __init__(self, name, digest, covered, expires):
        self.name, self.digest, self.covered, self.expires = name, digest, covered, expires


class ContextCaches:
    def __init__(self, client, label, clock=time.monotonic, model_name="models/{}".format):
        self._client, self._label, self._clock = client, label, clock
        self._model_name = model_name  # the model's resource name (Vertex AI's is longer)
        self._entries = {}  # session key -> _Entry
        self._refused = {}  # session key -> turns covered when the server refused a size
        self._broken = set()  # sessions whose entries failed for another reason

    def apply(self, request, body):
        """The body to send: naming the session's entry when it fits, else ``body``."""
        key = request.cache_key
        turns = body.get("contents") or []
        settled = len(turns) - 1
        if key is None or key in self._broken or settled < 1:
            return body
        head = {k: body[k] for k in ("systemInstruction", "tools") if k in body}
        entry = self._entries.get(key)
        if entry is not None and (entry.digest != _digest(request.model, head,
                                                          turns[:entry.covered])
                                  or len(turns) - entry.covered > max(entry.covered, 2)):
            self._drop(key)
            entry = None
        if entry is None:
            if settled < 2 * self._refused.get(key, 0):
                return body
            entry = self._create(key, request.model, head, turns[:settled])
            if entry is None:
                return body
        elif entry.expires - self._clock() < RENEW_BEFORE:
            self._renew(key, entry)
        out = {"cachedContent": entry.name, "contents": turns[entry.covered:]}
        out.update({k: v for k, v in body.items()
                    if k not in ("systemInstruction", "tools", "contents")})
        return out

    def close(self):
        for key in list(self._entries):
            self._drop(key)

    # ------------------------------------------------------------ the server's entries
    def _create(self, key, model, head, turns):
        payload = {"model": self._model_name(model), **head, "contents": turns, "ttl": f"{TTL}s"}
        try:
            answer = self._client.call("POST", "/cachedContents", payload, TIMEOUT)
        except ProviderHTTPError as exc:
            if exc.status == 400 and any(word in str(exc).lower()
                                         for word in ("too small", "min_total_token")):
                self._refused[key] = len(turns)
                log.info("%s: context cache not made yet (%s)", self._label, exc)
            else:
                self._broken.add(key)
                log.warning("%s: context cache off for this session: %s", self._label, exc)
            return None
        except ProviderError as exc:
            self._broken.add(key)
            log.warning("%s: context cache off for this session: %s", self._label, exc)
            return None
        name = answer.get("name") if isinstance(answer, dict) else None
        if not isinstance(name, str) or "cachedContents/" not in name:
            self._broken.add(key)
            log.warning("%s: context cache off for this session: no entry name", self._label)
            return None
        entry = _Entry(name, _digest(model, head, turns), len(turns), self._clock() + TTL)
        self._entries[key] = entry
        return entry

    def _renew(self, key, entry):
        try:
            self._client.call("PATCH", f"/{_path(entry.name)}?updateMask=ttl",
                              {"ttl": f"{TTL}s"}, TIMEOUT)
            entry.expires = self._clock() + TTL
        except ProviderError as exc:  # gone or expired: made again by the next request
            log.info("%s: context cache renewal failed: %s", self._label, exc)
            self._entries.pop(key, None)

    def _drop(self, key):
        entry = self._entries.pop(key, None)
        if entry is None:
            return
        try:
            self._client.call("DELETE", f"/{_path(entry.name)}", None, TIMEOUT)
        except ProviderError as exc:  # it expires on its own
            log.info("%s: context cache not deleted: %s", self._label, exc)


def _path(name):
    """The entry's route below the client's base: ``cachedContents/<id>`` (Vertex AI names
    it with its project and location, which its base already has)."""
    return "cachedContents/" + quote(name.rsplit("/", 1)[1], safe="")


def _digest(model, head, turns):
    text = json.dumps([model, head, turns], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()
