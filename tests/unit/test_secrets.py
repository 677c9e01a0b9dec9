"""core/secrets.py and the log: a secret with a stray CR/LF is stripped or refused, and no
remembered secret survives in a log line, a traceback or a user-facing error."""

import io
import logging

import pytest

from term2acp import diagnostics
from term2acp.turns import failures
from term2acp.core import secrets


def test_surrounding_line_breaks_are_stripped_and_inner_ones_refused():
    assert secrets.clean(" sk-unit-aaaaaaaa1111\r\n", "KEY") == "sk-unit-aaaaaaaa1111"
    with pytest.raises(secrets.SecretInvalid, match="KEY contains a line break") as info:
        secrets.clean("sk-unit-bbbb\r2222bbbb", "KEY")
    assert "bbbb" not in str(info.value)
    with pytest.raises(secrets.SecretInvalid, match="not ASCII"):
        secrets.clean("sk-unit-\u2013cccccccc", "KEY")


def test_every_log_line_and_traceback_is_masked():
    secrets.clean("sk-unit-dddddddd3333\r", "KEY")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(diagnostics._Masking(diagnostics.FORMAT))
    log = logging.getLogger("test_secrets")
    log.addHandler(handler)
    try:
        try:
            raise ValueError("Invalid header value b'Bearer sk-unit-dddddddd3333\\r'")
        except ValueError:
            log.exception("turn failed with sk-unit-dddddddd3333")
    finally:
        log.removeHandler(handler)
    assert "sk-unit-dddddddd3333" not in stream.getvalue()
    assert stream.getvalue().count("***") == 3  # the message, the source line, the error


def test_a_turn_failure_never_shows_a_secret():
    secrets.remember("tok-unit-eeeeeeee4444")
    text = failures.explain(RuntimeError("header rejected: tok-unit-eeeeeeee4444"))
    assert "eeee" not in text


def test_the_stderr_outlet_drops_and_counts_when_full(tmp_path):
    import os

    read, write = os.pipe()
    os.set_blocking(write, False)
    outlet = diagnostics.StderrOutlet(write, limit=1000)
    try:
        for _ in range(2000):  # ~200 KB into a 64 KiB pipe nobody reads: never blocks
            outlet.write(b"x" * 99 + b"\n")
        assert outlet.dropped > 0
        while os.read(read, 65536) and not outlet.flush_some():
            pass
        assert outlet.flush_some()
        os.set_blocking(read, False)
        tail = b""
        try:
            while True:
                tail += os.read(read, 65536)
        except BlockingIOError:
            pass
        assert b"log lines were dropped: stderr was not being read" in tail
    finally:
        os.close(read)
        os.close(write)
