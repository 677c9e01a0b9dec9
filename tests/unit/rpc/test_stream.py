import io
import os

import gevent
from gevent import monkey

from term2acp.rpc.stream import Oversized, Writer, open_reader, read_lines


def close_now(fd):
    """gevent defers os.close through the hub; tests need the close to have happened."""
    monkey.get_original("os", "close")(fd)


def lines_of(data, **kw):
    return list(read_lines(io.BytesIO(data), **kw))


def test_stream_splits_lines_and_skips_blank_ones():
    assert lines_of(b'{"a":1}\n\n  \n{"b":2}\n') == [b'{"a":1}', b'{"b":2}']


def test_stream_partial_line_across_chunks():
    assert lines_of(b'{"a":"' + b"x" * 100 + b'"}\n', chunk=7) == [b'{"a":"' + b"x" * 100 + b'"}']


def test_stream_trailing_line_without_newline_at_eof():
    assert lines_of(b'{"a":1}\n{"b":2}') == [b'{"a":1}', b'{"b":2}']


def test_stream_oversized_line_is_reported_and_skipped_without_buffering():
    data = b"y" * 50 + b"\n" + b"z" * 10_000 + b"\n" + b"ok\n"
    out = lines_of(data, max_line=100, chunk=64)
    assert out[0] == b"y" * 50
    assert isinstance(out[1], Oversized) and out[1].size == 10_000
    assert out[2] == b"ok"


def test_stream_oversized_line_at_eof():
    out = lines_of(b"z" * 500, max_line=100, chunk=64)
    assert len(out) == 1 and isinstance(out[0], Oversized)


def test_stream_non_utf8_bytes_pass_through_as_bytes():
    assert lines_of(b"\xff\xfe\n") == [b"\xff\xfe"]


def test_stream_reads_a_pipe_cooperatively_until_eof():
    r, w = os.pipe()
    reader = open_reader(r)
    got = []
    g = gevent.spawn(lambda: got.extend(read_lines(reader)))
    os.write(w, b'{"a":')
    gevent.sleep(0.01)
    assert not g.dead  # waiting for the rest of the line without blocking the hub
    os.write(w, b"1}\n")
    os.close(w)
    g.join(timeout=5)
    assert g.dead and got == [b'{"a":1}']
    os.close(r)


def test_writer_keeps_queue_order():
    r, w = os.pipe()
    writer = Writer(w)
    for i in range(100):
        writer.put(b"%d\n" % i)
    assert writer.drain(5)
    os.close(w)  # gevent defers the close through the hub: read cooperatively
    reader = open_reader(r)
    data = b""
    with gevent.Timeout(5):
        while chunk := reader.read(65536):
            data += chunk
    assert data.split() == [b"%d" % i for i in range(100)]
    os.close(r)
    gevent.sleep(0)


def test_writer_reports_broken_pipes():
    failures = []
    r2, w2 = os.pipe()
    close_now(r2)
    writer = Writer(w2, on_failure=failures.append)
    writer.put(b"x\n")
    assert not writer.drain(5)
    assert failures and writer.failed
    os.close(w2)


def _fill_pipe(w):
    """Fill the OS pipe so that the writer's next write would block."""
    import fcntl

    flags = fcntl.fcntl(w, fcntl.F_GETFL)
    fcntl.fcntl(w, fcntl.F_SETFL, flags | os.O_NONBLOCK)
    filled = 0
    try:
        while True:
            filled += os.write(w, b"x" * 4096)
    except BlockingIOError:
        return filled


def _drain_pipe(r, at_least):
    got = 0
    reader = open_reader(r)
    with gevent.Timeout(5):
        while got < at_least:
            got += len(reader.read(1 << 16))
    return got


def test_writer_put_wait_blocks_on_a_full_queue_and_put_never_does():
    r, w = os.pipe()
    filled = _fill_pipe(w)
    writer = Writer(w, limit=1000)
    with gevent.Timeout(5):
        while writer.queued_bytes < 1000:  # no wait while there is room
            writer.put_wait(b"y" * 99 + b"\n")
            gevent.sleep(0)
    producer = gevent.spawn(writer.put_wait, b"z\n")
    for _ in range(5):
        gevent.sleep(0)
    assert not producer.dead  # back-pressure: waits for room
    writer.put(b"r\n")  # never waits (the reader's answers)
    assert _drain_pipe(r, filled) >= filled
    producer.join(timeout=5)
    assert producer.dead
    assert writer.drain(5)
    os.close(w)
    os.close(r)
    gevent.sleep(0)


def test_writer_wait_flushed_returns_once_every_queued_line_is_written():
    r, w = os.pipe()
    filled = _fill_pipe(w)  # the writer's next write blocks until the pipe is read
    written = []
    writer = Writer(w, before_write=lambda: written.append("commit"))
    writer.wait_flushed()  # nothing queued: at once
    writer.put(b"answer\n")
    flushed = gevent.spawn(writer.wait_flushed)
    for _ in range(5):
        gevent.sleep(0)
    assert not flushed.dead and written == ["commit"]  # the line waits for the pipe
    data = b""
    reader = open_reader(r)
    with gevent.Timeout(5):
        while not data.endswith(b"answer\n"):
            data += reader.read(1 << 16)
    flushed.join(timeout=5)
    assert flushed.dead and len(data) == filled + len(b"answer\n")
    assert writer.drain(5)
    os.close(w)
    os.close(r)
    gevent.sleep(0)


def test_writer_drops_discarded_tagged_items_and_sweep_frees_room():
    r, w = os.pipe()
    filled = _fill_pipe(w)
    dropped = set()
    writer = Writer(w, limit=10_000, discard=lambda tag: tag in dropped)
    for n in range(50):
        writer.put(b"chunk %d\n" % n, tag="turn-1")
        writer.put(b"state %d\n" % n)
    queued = writer.queued_bytes
    dropped.add("turn-1")
    writer.sweep()
    assert writer.queued_bytes < queued
    reader = open_reader(r)
    data = b""
    with gevent.Timeout(5):
        while data.count(b"state") < 50:
            data += reader.read(1 << 16)
    assert b"chunk" not in data[filled:]
    assert data[filled:].split() [::2] == [b"state"] * 50
    assert writer.drain(5)
    os.close(w)
    os.close(r)
    gevent.sleep(0)


def test_writer_sweep_frees_exactly_the_dropped_turns_room_as_lines_keep_coming():
    """Two turns stream into a full queue; one is cancelled: a sweep frees its lines'
    room at once, the lines it queues afterwards are dropped too, the other turn's all
    go out in order, and the count of queued bytes ends at zero."""
    r, w = os.pipe()
    filled = _fill_pipe(w)
    dropped = set()
    writer = Writer(w, limit=4_000, discard=lambda tag: tag in dropped)
    for n in range(30):
        writer.put(b"a%d\n" % n, tag="turn-a")
        writer.put(b"b%d\n" % n, tag="turn-b")
    full = writer.queued_bytes
    assert writer.backlogged()
    dropped.add("turn-a")
    writer.sweep()
    assert writer.queued_bytes == full - sum(len(b"a%d\n" % n) + 64 for n in range(30))
    assert not writer.backlogged()
    writer.sweep()  # nothing new to free
    assert writer.queued_bytes == full - sum(len(b"a%d\n" % n) + 64 for n in range(30))
    for n in range(30, 40):
        writer.put_wait(b"a%d\n" % n, tag="turn-a")  # still streaming after the cancel
        writer.put_wait(b"b%d\n" % n, tag="turn-b")
    reader = open_reader(r)
    data = b""
    with gevent.Timeout(5):
        while not data.endswith(b"b39\n"):
            data += reader.read(1 << 16)
    assert data[filled:].split() == [b"b%d" % n for n in range(40)]
    assert writer.drain(5) and writer.queued_bytes == 0
    os.close(w)
    os.close(r)
    gevent.sleep(0)
