"""The provider's own web search (``[web_search]``): offering it, and showing each search.

With the switch on, every model request of a provider that can search on its server
(Anthropic; OpenAI's Responses API) offers it (``ModelRequest.web_search``). Any other
provider (Chat Completions servers, the local and scripted models) gets no search, and the
log says so once per provider, since a switch that does nothing unnoticed is a trap.

Nothing runs here: the provider's server searches and the model reads the results within
the same answer. Each search is shown to the user as a tool call of kind ``fetch``
(:class:`Searches`): in progress when it starts, completed with its results as links, or
failed with the provider's error code. It is reported like any call, so the journal keeps
it for replay, and one still open when the turn ends is settled with the turn's other
calls; nobody is asked, and no result goes to the model from us (the provider's own
record of the search goes back with the answer).
"""

import logging
import re
import weakref

from term2acp.turns.records import CallRecord, report
from term2acp.core.ids import new_id

log = logging.getLogger(__name__)

NAME = "web_search"
MAX_LINKS = 20  # results shown per search; the rest are counted
# per agent (its settings: several agents may share a process), the providers whose
# missing web search was logged
_told = weakref.WeakKeyDictionary()
_LINK = re.compile(r"https?://[^\s\x00-\x1f\x7f]+\Z")


def option(settings, provider):
    """The request's ``web_search`` (``{"max_uses": n}``), or None when it is off or the
    provider cannot search."""
    conf = settings.web_search
    if not conf.enabled:
        return None
    if getattr(provider, "web_search", False):
        return {"max_uses": conf.max_uses}
    name = getattr(provider, "name", "") or type(provider).__name__
    told = _told.setdefault(conf, set())
    if name not in told:
        told.add(name)
        log.warning("[web_search] enabled = true has no effect with provider %s: it has no "
                    "server-side web search (Anthropic and the OpenAI Responses API have)", name)
    return None


def title(action):
    action = action or {}
    kind = action.get("type")
    if kind == "search" and action.get("query"):
        return f"Web search: {action['query']}"
    if kind == "open_page" and action.get("url"):
        return f"Open page: {action['url']}"
    if kind == "find_in_page" and action.get("url"):
        return f"Find in page: {action.get('pattern') or ''} ({action['url']})"
    return "Web search"


def results_content(results):
    """Display items of a search's results: a link each (a URL that is not plain http(s)
    is shown as text), at most MAX_LINKS."""
    if not results:
        return [{"type": "text", "text": "No results."}]
    items = []
    for result in results[:MAX_LINKS]:
        url, name = result.get("url") or "", result.get("title") or ""
        if _LINK.match(url):
            items.append({"type": "link", "uri": url, "name": name or url})
        else:
            items.append({"type": "text", "text": f"{name} {url}".strip()})
    if len(results) > MAX_LINKS:
        items.append({"type": "text", "text": f"... and {len(results) - MAX_LINKS} more."})
    return items


class Searches:
    """A turn's web searches: the provider's search id -> its CallRecord, kept in the
    turn's open calls until it settles (a search the server paused may settle in the
    turn's next request)."""

    def __init__(self, turn):
        self.turn = turn
        self.records = {}

    def report(self, search):
        """Report one :class:`~term2acp.providers.base.WebSearch` event."""
        turn, record = self.turn, self.records.get(search.search_id)
        fields = {}
        if record is None:
            record = CallRecord(new_id("tc"), NAME, kind="fetch")
            self.records[search.search_id] = record
            turn.calls[record.id] = record
            fields.update(kind="fetch", name=NAME, title=title(search.action))
        elif not record.open:
            return  # settled already: a repeated event changes nothing
        if search.action and search.action != record.raw_input:
            record.raw_input, record.title = search.action, title(search.action)
            fields.update(raw_input=search.action, title=record.title)
        if search.status == "completed":
            fields["content"] = record.content = results_content(search.results)
        elif search.status == "failed":
            why = f": {search.error}." if search.error else " (the provider gave no reason)."
            fields["content"] = record.content = [{"type": "text", "text": "Web search failed" + why}]
        if fields or record.status is None:
            report(turn, record, search.status, **fields)
        if not record.open:
            turn.calls.pop(record.id, None)
