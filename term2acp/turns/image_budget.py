"""Images in a model request: the newest ones at full size, older ones as a placeholder.

Screenshots and images read with read_file stay in the history. Sent again with every
request, ten 4 MiB screenshots made every later request over 50 MiB, past what providers
accept (Anthropic: 32 MB per request; at most 100 images). So each request carries, newest
first, the images that fit :data:`REQUEST_BYTES` of base64 data and :data:`MAX_IMAGES`;
an older one is replaced by a line saying it was left out and how to see it again. The
history keeps every image (a later, smaller request still has them); only the request is
bounded, and the context estimate counts what is sent (``context.IMAGE_CHARS`` each).
"""

REQUEST_BYTES = 20 * 1024 * 1024  # base64 bytes of images in one request
MAX_IMAGES = 20  # images in one request

PLACEHOLDER = ("[{count} older image(s) left out of this request to keep it under the "
               "provider's size limit; read the file again to look at it.]")


def bound(messages, budget=REQUEST_BYTES, most=MAX_IMAGES, indices=None):
    """``messages`` with images past the budget (older first) replaced by a placeholder
    line; messages with nothing to drop are the same objects, the others new copies.
    ``indices``: where the messages with images are, in order (else every one is looked at)."""
    kept_bytes = kept = 0
    out = list(messages)
    for index in reversed(range(len(out)) if indices is None else indices):
        message = out[index]
        images = message.get("images")
        if not images:
            continue
        keep = []
        for image in reversed(images):
            size = len(image.get("data") or "")
            if kept < most and kept_bytes + size <= budget:
                keep.append(image)
                kept += 1
                kept_bytes += size
        if len(keep) == len(images):
            continue
        keep.reverse()
        note = PLACEHOLDER.format(count=len(images) - len(keep))
        content = message.get("content") or ""
        out[index] = dict(message, images=keep, content=f"{content}\n{note}" if content else note)
        if not keep:
            del out[index]["images"]
    return out
