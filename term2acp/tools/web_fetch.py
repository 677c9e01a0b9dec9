"""web_fetch: read a web page as Markdown (or text/JSON as it is), in the agent process.

Who decides where a request may go (every URL, the first and each redirect's):

* the host's addresses are looked up once and classified: link-local addresses and the
  cloud metadata services (169.254.169.254 and friends, ``metadata.google.internal``)
  are refused outright; loopback, private, shared and other non-global addresses ask
  every time, with no "for the session" choice; public hosts ask once per host, and an
  "allow this host for the session" answer is a session grant (``("web", host)``);
* in the ``ask`` mode every fetch asks and grants are not consulted;
* the connection goes to the address that was checked (``webpage.get``), so a later DNS
  answer cannot move it;
* a redirect is a new URL: same host (and port and scheme) continues, any other host is
  checked as above, asking again where it must, at most MAX_REDIRECTS times.

A rejection fetches nothing. The whole call is bounded by FETCH_SECONDS.
"""

import socket
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import gevent
from marshmallow import Schema, fields, validate

from term2acp.core.approvals import WEB_HOST, WEB_PRIVATE, ApprovalRequest
from term2acp.net.address import Target, lookup, proxy_for
from term2acp.net.connection import FAILURES
from term2acp.net.errors import NetError
from term2acp.tools import webpage
from term2acp.tools.base import Plan, Tool, ToolError, ToolResult

MAX_REDIRECTS = 5
FETCH_SECONDS = 30.0
DEFAULT_CHARS, MAX_CHARS = 20_000, 200_000
# Per character returned: the body's prefix read (after the HTML head), and the part of it
# converted first; a page with less text than that in its markup converts twice as much
# again, up to the whole prefix.
PREFIX_BYTES, CONVERT_BYTES = 8, 2
METADATA_ADDRESSES = ("169.254.169.254", "169.254.170.2", "169.254.169.123", "100.100.100.200",
                      "fd00:ec2::254", "fd00:ec2::23")
METADATA_NAMES = ("metadata.google.internal", "metadata.goog", "metadata", "instance-data",
                  "instance-data.ec2.internal")


class WebFetchParams(Schema):
    url = fields.String(required=True, validate=validate.Length(min=1, max=8192), metadata={
        "description": "The http(s) URL to read."})
    max_chars = fields.Integer(load_default=DEFAULT_CHARS,
                               validate=validate.Range(min=100, max=MAX_CHARS), metadata={
        "description": f"Most characters of the page to return. Default: {DEFAULT_CHARS}."})


@dataclass
class Place:
    """A checked URL: where it connects and whether it may be remembered."""

    url: str
    host: str
    origin: tuple  # (scheme, host, port)
    address: str  # the IP the connection goes to
    private: bool  # loopback or another non-global address: asked every time


@dataclass
class FetchPlan(Plan):
    place: Place | None = None
    allowed: set = field(default_factory=set)  # origins this call may reach


def check_url(url):
    """The :class:`Place` of ``url``, or ToolError when it is malformed or refused."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ToolError(f"{url!r} is not an http(s) URL with a host; web_fetch reads "
                        "http:// and https:// pages only.")
    if parts.username or parts.password:
        raise ToolError("URLs with a user name or password are not fetched; leave the "
                        "credentials out.")
    host = parts.hostname.rstrip(".").lower()
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ToolError(f"{url!r} has an invalid port.") from None
    if host in METADATA_NAMES:
        raise ToolError(f"{host} is a cloud metadata service; web_fetch never reads it.")
    try:
        addresses = _resolve(host, port)
    except ToolError:
        if literal_or_local(host) or not _proxied(url):
            raise
        # Only the proxy can resolve this name (a network without outside DNS): it is
        # asked about as a public host, and the proxy connects.
        return Place(url.strip(), host, (parts.scheme, host, port), "", False)
    for ip in addresses:
        metadata = str(ip) in METADATA_ADDRESSES
        if metadata or ip.is_link_local or ip.is_multicast:
            what = "a cloud metadata address" if metadata else \
                "a link-local address" if ip.is_link_local else "a multicast address"
            raise ToolError(f"{host} resolves to {ip}, {what}; web_fetch never reads it.")
    private = any(not ip.is_global for ip in addresses)
    return Place(url.strip(), host, (parts.scheme, host, port), str(addresses[0]), private)


def literal_or_local(host):
    return host == "localhost" or host.endswith(".localhost") or host.replace(".", "").isdigit() \
        or ":" in host


def _proxied(url):
    try:
        return proxy_for(Target(url)) is not None
    except NetError:
        return False


def _resolve(host, port):
    try:
        found = lookup(host, port)
    except (OSError, UnicodeError) as exc:
        raise ToolError(f"cannot resolve {host}: {exc}. Check the URL.") from None
    if not found:
        raise ToolError(f"{host} has no address.")
    # an IPv4 address written as IPv6 (::ffff:a.b.c.d) is judged as the IPv4 address
    return [ip.ipv4_mapped or ip if ip.version == 6 else ip for ip in found]


def request_for(place, ctx):
    """The approval ``place`` needs now, or None (a session grant covers it)."""
    if place.private:
        return ApprovalRequest(variant=WEB_PRIVATE, title=f"Fetch {place.url} (a loopback or "
                               f"private address: {place.address})")
    grant = ("web", place.host)
    if ctx.mode != "ask" and ctx.access.can_use_tool(grant):
        return None
    return ApprovalRequest(variant=WEB_HOST, title=f"Fetch {place.url}", grant=grant)


class WebFetchTool(Tool):
    name = "web_fetch"
    kind = "fetch"  # reads from the network, writes nothing; asks per host
    Params = WebFetchParams
    description = (
        "Read a web page (documentation, an issue, an API reference) by URL: HTML comes "
        "back as Markdown, text and JSON as they are; binary content is refused. The user "
        "approves each host. Use it when the answer is on the web, not for files in the "
        "workspace.")

    def title(self, args):
        return f"Fetch {args.get('url')}"

    def approval(self, args, ctx):
        place = check_url(args["url"])
        return FetchPlan(request=request_for(place, ctx), target=place.url, locations=[],
                         place=place, allowed={place.origin})

    def run(self, args, ctx, plan=None):
        if plan is None:
            plan = self.approval(args, ctx)
            if plan.request is not None:
                raise ToolError("this fetch needs the user's approval; nothing was fetched.")
        try:
            with gevent.Timeout(FETCH_SECONDS, ToolError(
                    f"the fetch took longer than {FETCH_SECONDS:.0f} s and was stopped.")):
                reply = self._follow(ctx, plan, args["max_chars"] * PREFIX_BYTES)
                return self._result(args, reply, webpage)
        except webpage.FetchError as exc:
            raise ToolError(f"{args['url']}: {exc}") from None

    def _follow(self, ctx, plan, prefix):
        place = plan.place
        for _ in range(MAX_REDIRECTS + 1):
            try:
                reply = webpage.get(place.url, place.address, prefix)
            except FAILURES as exc:
                raise ToolError(f"could not fetch {place.url}: {_why(exc)}") from None
            except NetError as exc:  # a proxy setting the providers refuse too
                raise ToolError(f"could not fetch {place.url}: {exc}") from None
            if reply.location is None:
                return reply
            place = self._redirect(ctx, plan, place, reply.location)
        raise ToolError(f"{plan.place.url} redirected more than {MAX_REDIRECTS} times; "
                        "nothing more was fetched.")

    def _redirect(self, ctx, plan, place, location):
        target = check_url(location)
        if target.origin in plan.allowed and not target.private:
            return target
        if target.origin in plan.allowed and target.address == place.address:
            return target  # the same private origin the user just allowed
        request = request_for(target, ctx)
        if request is not None:
            request.title = f"Fetch {target.url} (redirected from {place.url})"
            if not ctx.approve(request):
                raise ToolError(f"{place.url} redirected to {target.url}, which the user did "
                                "not allow; nothing was fetched from it.")
        plan.allowed.add(target.origin)
        return target

    def _result(self, args, reply, webpage):
        url = reply.url
        if reply.status >= 400:
            text = webpage.decode(reply)[:500] if webpage.kind_of(reply) else ""
            raise ToolError(f"{url} answered HTTP {reply.status}." + (
                f" The page says: {' '.join(text.split())}" if text.strip() else ""))
        kind = webpage.kind_of(reply)
        if kind is None:
            raise ToolError(f"{url} returned {reply.content_type or 'binary'} content "
                            f"({len(reply.body)} bytes), which web_fetch does not show: only "
                            "HTML, text and JSON. Nothing was returned.")
        text = webpage.decode(reply)
        limit = args["max_chars"]
        if kind == "html":
            text = _converted(text, url, limit, webpage)
        total = len(text)
        note = ""
        if total > limit or not reply.complete:
            text = text[:limit]
            of = f"of {total} characters" if reply.complete else \
                f"characters of the first {len(reply.body)} bytes of a longer page"
            note = (f"\n\n[cut at {len(text)} {of}; call again with a larger max_chars (at "
                    f"most {MAX_CHARS}) to read more.]")
        head = f"URL: {url}\nContent-Type: {reply.content_type or 'unknown'}\n\n"
        return ToolResult(head + text + note, content=[{"type": "text", "text": head + text}])


def _converted(html, url, limit, webpage):
    """Markdown of enough of ``html`` for ``limit`` characters (see CONVERT_BYTES)."""
    head = html.find("</head")
    size = max(0, head) + limit * CONVERT_BYTES
    while True:
        text = webpage.to_markdown(html[:size], url)
        if len(text) > limit or size >= len(html):
            return text
        size *= 2


def _why(exc):
    if isinstance(exc, socket.timeout):
        return "the server did not answer in time"
    if getattr(exc, "reason", None):
        return str(exc.reason)
    return exc.strerror or str(exc) or type(exc).__name__
