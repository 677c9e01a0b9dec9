"""What an OpenAI-compatible server accepts: the Responses API and ``prompt_cache_key``.

Both keep a session's prompt cache warm (the Responses API carries the encrypted reasoning
from round to round; the key routes a session's requests to the machine holding its
prefix), so they are used wherever the server takes them. The official endpoints take
both. Another server is asked once per agent process and base URL: the first request
goes to ``/responses`` with the key; a server without the route (404, 405, 501, or a
400 about the route) gets Chat Completions from then on, and one that refuses the field
by name (a 400 or 422 naming ``prompt_cache_key``) gets requests without it. What a
server accepted or refused is remembered for the rest of the process; requests that asked
at the same moment (twenty sessions prompted at once) each go again the other way. A
provider section's ``api`` or ``prompt_cache_key`` settles the question without asking.
"""

from term2acp.providers.errors import ContextOverflow, ProviderHTTPError

NO_ROUTE = (404, 405, 501)
_LEARNED = {}  # base URL -> {"api": "responses" | "chat", "cache_key": bool}


def forget():
    """Forget every server's answers: for the in-process test kit (``testing/inprocess.py``),
    where each agent served is a process of its own and a loopback port a test's fake
    server had may be another's later."""
    _LEARNED.clear()


class Server:
    """One server's answers as far as this process knows them (``learned``), and the
    provider section's settings (``api``, ``cache_key``: None when left to asking)."""

    def __init__(self, url, api, cache_key):
        self.learned = _LEARNED.setdefault(url, {})
        self.api, self.cache_key = api, cache_key

    def choice(self):
        """``(api, send the key)`` for the next request."""
        api = self.api or self.learned.get("api", "responses")
        keyed = self.cache_key if self.cache_key is not None \
            else self.learned.get("cache_key", True)
        return api, keyed

    def settled(self):
        return (self.api or "api" in self.learned) and \
            (self.cache_key is not None or "cache_key" in self.learned)

    def accepted(self, api, keyed):
        self.learned.setdefault("api", api)
        if keyed:
            self.learned.setdefault("cache_key", True)

    def refused(self, error, api, keyed):
        """True when ``error`` (before any answer) says the server lacks what was tried:
        it is remembered, and the request can go again the other way."""
        if not isinstance(error, ProviderHTTPError) or isinstance(error, ContextOverflow):
            return False
        text = str(error).lower()
        # several requests may have asked at once: one that comes back after another has
        # learned the same answer goes again the other way too; only what the server did
        # accept before (learned True / "responses") makes a refusal a real error
        if keyed and self.cache_key is None and error.status in (400, 422) \
                and "prompt_cache_key" in text and self.learned.get("cache_key") is not True:
            self.learned["cache_key"] = False
            return True
        if api == "responses" and self.api is None and \
                self.learned.get("api") != "responses" and (
                    error.status in NO_ROUTE or error.status == 400 and "/responses" in text):
            self.learned["api"] = "chat"
            return True
        return False
