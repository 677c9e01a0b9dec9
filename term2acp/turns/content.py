"""Prompt content -> what the model reads.

* ``text``: as written;
* ``resource`` (embedded context) with ``text``: the file's text between clearly marked
  ``<file uri=...>`` / ``</file>`` lines, cut at :data:`FILE_CAP` characters with a note;
  with ``blob`` (binary): refused (``PromptError``, -32602 on the wire);
* ``resource_link`` to a ``file://`` inside the session root: the file is read (the real
  path must stay inside the root after resolving symlinks; regular files only, opened
  without following a final symlink, at most :data:`FILE_CAP` characters) and attached
  like an embedded resource; a link elsewhere, or one that cannot be read, stays a short
  reference the model can follow with its tools (which ask for approval outside the root);
* ``image``: passed to the model when it accepts images (catalog or config ``images``),
  refused otherwise;
* ``audio``: refused; ``_``-prefixed custom blocks are ignored.

The session title comes from the user's own words only (:func:`user_words`).
"""

import base64
import binascii
import os
import stat
from urllib.parse import unquote, urlsplit

from term2acp.core.text import scrub_text
from term2acp.core.workspace import is_within
from term2acp.turns.prompt import PromptError

FILE_CAP = 100_000  # characters of one attached file
TOTAL_CAP = 400_000  # characters of all attached files of one prompt
IMAGE_CAP = 5 * 1024 * 1024  # bytes of one decoded image
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


class ModelText(str):
    """The prompt as the model reads it; ``images`` holds ``{"mime_type", "data"}`` parts,
    ``typed`` the user's own words (:func:`user_words`), where a slash command may start
    when a client puts attached context in text blocks before them."""

    images = ()
    typed = ""


def validate(blocks):
    """Refuse what can never be sent, before any provider is set up."""
    if not blocks:
        raise PromptError("prompt must contain text")
    for block in blocks:
        kind = block.get("type")
        if kind == "resource":
            resource = block.get("resource") or {}
            if not isinstance(resource.get("text"), str):
                uri = resource.get("uri", "")
                raise PromptError(f"Embedded resource {uri} is binary (blob): term2 passes only "
                                  "text resources to the model. Attach it as text, or link it "
                                  "with resource_link.")
        elif kind == "audio":
            raise PromptError("Unsupported prompt content block: audio (the agent does not "
                              "advertise promptCapabilities.audio)")
        elif kind not in ("text", "resource_link", "image") and not _custom(kind):
            raise PromptError(f"Unsupported prompt content block: {kind}")


def to_model(blocks, root, images=False, model=""):
    """The :class:`ModelText` for validated ``blocks``."""
    validate(blocks)
    parts, pictures, budget = [], [], [TOTAL_CAP]
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            parts.append(block["text"])
        elif kind == "resource":
            resource = block["resource"]
            parts.append(_file_block(resource.get("uri", ""), resource["text"],
                                     resource.get("mimeType") or resource.get("mime_type"),
                                     budget))
        elif kind == "resource_link":
            parts.append(_linked(block, root, budget))
        elif kind == "image":
            pictures.append(_image(block, images, model))
    text = "\n".join(p for p in parts if p)
    if not text.strip():
        if not pictures:
            raise PromptError("prompt must contain text")
        text = "(an image)"
    result = ModelText(scrub_text(text))
    result.images = tuple(pictures)
    result.typed = scrub_text(user_words(blocks))
    return result


def user_words(blocks):
    """The user's own words: the last text block that is not blank. Clients such as
    CodeCompanion send attached context (a rules file) as text blocks before what the user
    typed, so the first block is not the user's."""
    for block in reversed(blocks or ()):
        if block.get("type") == "text" and block["text"].strip():
            return block["text"]
    return ""


def _custom(kind):
    return isinstance(kind, str) and kind.startswith("_")


def _file_block(uri, text, mime, budget):
    cap = min(FILE_CAP, max(0, budget[0]))
    shown = text[:cap]
    budget[0] -= len(shown)
    note = ""
    if len(shown) < len(text):
        note = (f"\n[... truncated: {len(shown):,} of {len(text):,} characters attached; read the "
                "file with the tools for the rest ...]")
    mime = f' mimeType="{_attr(mime)}"' if mime else ""
    return f'<file uri="{_attr(uri)}"{mime}>\n{shown}{note}\n</file>'


def _attr(value):
    """A value that cannot end the delimiting tag early."""
    return str(value).replace('"', "%22").replace("\n", " ").replace(">", "%3E")


def _linked(block, root, budget):
    uri = block["uri"]
    label = block.get("title") or block.get("name") or uri
    path = _file_path(uri)
    reference = f"[Linked resource: {label} <{uri}>]"
    if path is None:
        return reference
    real = os.path.realpath(path)
    if not is_within(root, real):
        return f"{reference} (outside the workspace: not attached; read it with the tools)"
    text, why = _read_text(real)
    if text is None:
        return f"{reference} ({why}: not attached)"
    return _file_block(uri, text, block.get("mimeType") or block.get("mime_type"), budget)


def _file_path(uri):
    parts = urlsplit(uri)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return None
    path = unquote(parts.path)
    return path if os.path.isabs(path) and "\x00" not in path else None


def _read_text(real):
    """``(text, None)`` or ``(None, why)``; reads at most FILE_CAP characters' worth."""
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return None, f"cannot be read: {exc.strerror or exc}"
    try:
        if not _regular(fd):
            return None, "not a regular file"
        data = os.read(fd, FILE_CAP * 4 + 4)
        size = os.fstat(fd).st_size
    finally:
        os.close(fd)
    if b"\x00" in data[:8192]:
        return None, f"a binary file ({size:,} bytes)"
    text = data.decode("utf-8", "replace")
    if size > len(data):
        text += f"\n[... the file has {size:,} bytes; only the start is attached ...]"
    return text, None


def _regular(fd):
    return stat.S_ISREG(os.fstat(fd).st_mode)


def _image(block, images, model):
    if not images:
        name = f" ({model})" if model else ""
        raise PromptError(f"The current model{name} does not accept images; send the prompt "
                          "without the image, or choose a model that takes images (set "
                          "images = true in config.toml if it does).")
    mime = (block.get("mimeType") or block.get("mime_type") or "").lower()
    if mime not in IMAGE_TYPES:
        raise PromptError(f"Unsupported image type {mime or '(none)'}: send PNG, JPEG, GIF "
                          "or WebP.")
    data = block.get("data") or ""
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise PromptError("The image data is not valid base64.") from None
    if len(raw) > IMAGE_CAP:
        raise PromptError(f"The image is {len(raw):,} bytes; the limit is {IMAGE_CAP:,}.")
    return {"mime_type": mime, "data": data}
