"""read_file on an image, for models that accept images.

The turn sets ``ctx.images`` when the session's model takes image input (catalog or config
``images``). Then a PNG, JPEG, GIF or WebP file (recognised by its first bytes, at most
:data:`IMAGE_CAP` bytes) is returned as image content for the model: the text says what was
attached, ``ToolResult.images`` carries ``{"mime_type", "data"}`` (base64), which the
providers send as image input. For other models read_file refuses it as a binary file.
"""

import base64

from term2acp.tools.base import ToolError, ToolResult

IMAGE_CAP = 5 * 1024 * 1024
MAGIC = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"),
         (b"GIF87a", "image/gif"), (b"GIF89a", "image/gif"))


def sniff(head):
    """The image MIME type of a file starting with ``head``, or None."""
    for magic, mime in MAGIC:
        if head.startswith(magic):
            return mime
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def wanted(ctx, head):
    return ctx.images and sniff(head) is not None


def image_result(shown, fh):
    """The ToolResult for the image file open as ``fh`` (``shown``: its display path)."""
    head = fh.peek(16)[:16]
    mime = sniff(head)
    data = fh.read(IMAGE_CAP + 1)
    if len(data) > IMAGE_CAP:
        raise ToolError(f"{shown} is an image larger than {IMAGE_CAP // (1024 * 1024)} MiB; "
                        "too big to show the model.")
    text = f"Image {shown} ({mime}, {len(data):,} bytes) is attached for you to look at."
    result = ToolResult(text, content=[{"type": "text", "text": text}])
    result.images = [{"mime_type": mime, "data": base64.b64encode(data).decode("ascii")}]
    return result
