"""One bounded HTTP GET for web_fetch, and the page as text for the model.

Where a request goes is decided before it is made (:mod:`term2acp.tools.web_fetch`):
the caller passes the address it approved, and the connection goes to that address (the
name is not looked up again, so a second answer of the DNS cannot move the request
elsewhere); TLS still verifies the certificate against the host name. The connection,
proxies and TLS are the one network path's (:mod:`term2acp.net`), as for the providers and
MCP: ``HTTPS_PROXY``/``HTTP_PROXY``/``NO_PROXY`` with a ``CONNECT`` tunnel (then the proxy
resolves the name), the system CAs or ``SSL_CERT_FILE``. Redirects are not followed here: each one comes back to the caller
as a new URL to check.

Only a prefix of the body is read (``limit`` bytes after gzip/deflate decoding, at most
:data:`MAX_BYTES`; for HTML counted from the end of the ``<head>``, whose first
:data:`HEAD_CAP` bytes are read whole): the model sees ``max_chars`` of the page, so the
caller asks for a few times that and the connection is closed once it is in, whatever the
page's size. HTML becomes Markdown (``html-to-markdown``, a maintained MIT library with a
Rust core, imported by the preload in the background), text and JSON stay as they are,
anything else is refused by its type.
"""

import re
import zlib
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import gevent

from term2acp import __version__
from term2acp.net.address import Target
from term2acp.net.connection import connection

MAX_BYTES = 5 * 1024 * 1024  # of the (decoded) body
HEAD_CAP = 1024 * 1024  # an HTML head is read whole up to this, beyond the prefix
CHUNK = 64 * 1024
_HEAD_END = re.compile(rb"</head\s*>", re.I)
CONNECT_SECONDS = 10.0
HEADERS = {
    "User-Agent": f"term2acp/{__version__} (web_fetch)",
    "Accept": "text/html,application/xhtml+xml,text/*;q=0.9,application/json;q=0.9,*/*;q=0.1",
    "Accept-Encoding": "gzip, deflate",
}
TEXT_TYPES = ("application/json", "application/xml", "application/javascript",
              "application/x-javascript", "application/ecmascript", "application/x-yaml",
              "application/yaml", "application/toml", "application/x-sh", "application/sql",
              "application/ld+json", "application/rss+xml", "application/atom+xml")
HTML_TYPES = ("text/html", "application/xhtml+xml")
_META_CHARSET = re.compile(rb"""<meta[^>]+charset=["']?([A-Za-z0-9_.:-]+)""", re.I)


class FetchError(Exception):
    """The page could not be fetched or shown; the message is for the model."""


@dataclass
class Reply:
    status: int
    url: str
    location: str | None  # an absolute redirect target
    content_type: str
    charset: str | None
    body: bytes
    complete: bool = True  # False: the body goes on beyond what was read


def get(url, address, limit=MAX_BYTES):
    """GET ``url`` with the connection pinned to ``address`` (an IP string; ignored when
    a proxy is used), reading a prefix of ``limit`` bytes of the body (module docstring);
    the redirect target is returned, never followed."""
    conn, _proxy = connection(Target(url), CONNECT_SECONDS, address=address)
    try:
        path = urlsplit(url)._replace(scheme="", netloc="", fragment="").geturl() or "/"
        conn.request("GET", path, headers=HEADERS)
        raw = conn.getresponse()
        location = raw.getheader("Location")
        if 300 <= raw.status < 400 and location:
            return Reply(raw.status, url, urljoin(url, location.strip()), "", None, b"")
        content_type = raw.getheader("Content-Type") or ""
        mime, _, params = content_type.partition(";")
        mime = mime.strip().lower()
        body, complete = _read(raw, (raw.getheader("Content-Encoding") or "").strip().lower(),
                               min(limit, MAX_BYTES), mime in HTML_TYPES or not mime)
        charset = re.search(r"charset=\"?([^\";\s]+)", params, re.I)
        return Reply(raw.status, url, None, mime, charset.group(1) if charset else None, body,
                     complete)
    finally:
        conn.close()


def _read(raw, encoding, limit, html):
    """``(prefix, complete)``: the decoded body's first ``limit`` bytes (more for an HTML
    head), read in chunks and never beyond what that needs."""
    if encoding in ("gzip", "x-gzip", "deflate"):
        inflater = zlib.decompressobj(47 if encoding != "deflate" else zlib.MAX_WBITS)
    elif encoding in ("", "identity"):
        inflater = None
    else:
        raise FetchError(f"the server sent the body in an encoding web_fetch cannot read "
                         f"({encoding}).")
    data, wanted, head = bytearray(), limit, html
    while len(data) <= wanted:
        chunk = raw.read(CHUNK)
        if not chunk:
            return bytes(data), True
        if inflater is not None:
            try:
                chunk = inflater.decompress(chunk, wanted + 1 - len(data))
            except zlib.error:
                raise FetchError(f"the page's {encoding} body is corrupt.") from None
        data += chunk
        if head:  # the prefix starts where the head ends
            end = _HEAD_END.search(data, 0, HEAD_CAP)
            if end is not None or len(data) >= HEAD_CAP:
                head = False
                wanted = min(MAX_BYTES, limit + (end.end() if end else 0))
            else:
                wanted = max(wanted, len(data) + 1)
        if inflater is not None and inflater.unconsumed_tail:
            break  # more decoded bytes than wanted are waiting
    return bytes(data[:wanted]), False


def kind_of(reply):
    """"html", "text" or None (binary) for a reply's body."""
    mime = reply.content_type
    if mime in HTML_TYPES:
        return "html"
    if mime.startswith("text/") or mime in TEXT_TYPES or mime.endswith(("+json", "+xml")):
        return "text"
    if not mime or mime == "application/octet-stream":  # no type said: look at the bytes
        head = reply.body[:8192]
        if b"\0" in head:
            return None
        if head.lstrip()[:15].lower().startswith((b"<!doctype html", b"<html")):
            return "html"
        try:
            head.decode("utf-8")
        except UnicodeDecodeError as exc:
            if exc.start < len(head) - 4:  # not just a character cut at the end
                return None
        return "text"
    return None


def decode(reply):
    charset = reply.charset
    if charset is None and kind_of(reply) == "html":
        found = _META_CHARSET.search(reply.body[:4096])
        charset = found.group(1).decode("ascii", "replace") if found else None
    try:
        return reply.body.decode(charset or "utf-8", errors="replace")
    except LookupError:  # an unknown charset name
        return reply.body.decode("utf-8", errors="replace")


def to_markdown(html, url):
    """The page as Markdown: scripts, styles and navigation dropped, links absolute."""
    from html_to_markdown import ConversionOptions, convert

    options = ConversionOptions(base_url=url, extract_metadata=False)
    # the conversion is one native call; the hub's thread pool keeps it off the hub
    result = gevent.get_hub().threadpool.spawn(convert, html, options).get()
    return getattr(result, "content", result) or ""
