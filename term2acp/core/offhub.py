"""A big file's bytes and text worked on in a thread of gevent's pool, so the hub answers.

Reading, decoding, searching, splicing, diffing, encoding and writing a 50 MB file take a
few hundred ms; on the hub nothing else runs meanwhile (``bench/scale`` edit: the hub
held 250-600 ms). From ``BIG`` bytes (or characters) on, the editing tools and the
checkpoints hand that work to the pool (:func:`heavy`). There it holds the interpreter
only as long as one C call runs: decoding and encoding go ``STEP`` at a time
(:func:`decode`, :func:`encode`), so the hub gets the interpreter back within the switch
interval or one whole-text operation (a search, a splice: a few ms on 50 MB).

Only plain work goes there: bytes, text and descriptors the caller holds; nothing that
touches the hub (the editor, the store, approvals, greenlets). The caller waits for the
thread even when it is killed meanwhile (a cancelled turn): the work may be using a
descriptor the caller closes as it unwinds, and a closed descriptor's number can be
reused at once by another open. The kill is raised once the thread is done.
"""

import codecs

import gevent

BIG = 1 << 20  # bytes or characters from which the work goes to the thread
STEP = 1 << 20  # bytes decoded, characters encoded, per C call


def heavy(size, work, *args):
    """``work(*args)``: here when ``size`` is below ``BIG``, else in a thread of gevent's
    pool (its exception is raised here). Killed meanwhile, the caller still waits for the
    thread, then raises the kill."""
    if size < BIG:
        return work(*args)
    result = gevent.get_hub().threadpool.spawn(work, *args)
    try:
        return result.get()
    except BaseException:
        while not result.ready():  # the thread may be using what the caller will close
            try:
                result.wait()
            except BaseException:  # noqa: BLE001 - a second kill waits the same
                pass
        raise


def decode(data):
    """``data`` as strict UTF-8, a ``STEP`` at a time; a ``UnicodeDecodeError`` is the one
    decoding it whole raises (its position in ``data``)."""
    if len(data) <= STEP:
        return data.decode("utf-8")
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    view, parts = memoryview(data), []
    try:
        for at in range(0, len(data), STEP):
            parts.append(decoder.decode(view[at:at + STEP], at + STEP >= len(data)))
    except UnicodeDecodeError:
        return bytes(data).decode("utf-8")  # raises it again, positioned in the whole
    return "".join(parts)


def newlines(data, start, end):
    """How many newlines ``data`` (bytes or text) has in ``[start, end)``, counted a
    ``STEP`` at a time (counting one character is a plain loop in C, ~1 ms a MB)."""
    newline = b"\n" if isinstance(data, (bytes, bytearray)) else "\n"
    return sum(data.count(newline, at, min(at + STEP, end)) for at in range(start, end, STEP))


def encode(text):
    """``text`` as UTF-8 bytes, a ``STEP`` of characters at a time."""
    if len(text) <= STEP:
        return text.encode("utf-8")
    return b"".join(text[at:at + STEP].encode("utf-8") for at in range(0, len(text), STEP))
