"""sandbox/loopback.py and bwrap.start: one session's commands share a private loopback,
and a started command keeps running, reads its input and ends with its group."""

import socket

import gevent
import pytest

from term2acp import sandbox
from term2acp.sandbox import bwrap
from tests.unit.sandbox.support import HostTree, host_pids_with, needs_sandbox, wait_until

pytestmark = needs_sandbox()

SERVE = ("import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); "
         "print(s.getsockname()[1], flush=True); c, _ = s.accept(); c.sendall(b'pong'); "
         "c.close()")
CONNECT = ("import socket, sys; c = socket.create_connection(('127.0.0.1', int(sys.argv[1])), "
           "timeout=5); print(c.recv(10).decode())")


@pytest.fixture
def tree():
    tree = HostTree()
    yield tree
    tree.cleanup()


def started_server(tree, loopback, network=False):
    out = bytearray()
    child = bwrap.start(["python3", "-c", SERVE], tree.root, tree.settings(),
                        on_output=out.extend, loopback=loopback, network=network)
    assert wait_until(lambda: out.strip(), timeout=10), "the server printed no port"
    return child, int(out.split()[0])


def connect(tree, loopback, port):
    out = bytearray()
    result = bwrap.run(["python3", "-c", CONNECT, str(port)], tree.root, tree.settings(),
                       on_output=out.extend, timeout=20, loopback=loopback)
    return result, out.decode()


def test_a_server_one_command_starts_is_reached_by_the_next(tree):
    loopback = sandbox.Loopback()
    try:
        server, port = started_server(tree, loopback)
        result, text = connect(tree, loopback, port)
        assert (result, text.strip()) == (sandbox.Exit(0, None), "pong")
        assert server.wait(10) == sandbox.Exit(0, None)
    finally:
        loopback.close()


def test_another_loopback_and_the_host_do_not_see_it(tree):
    ours, theirs = sandbox.Loopback(), sandbox.Loopback()
    try:
        server, port = started_server(tree, ours)
        result, text = connect(tree, theirs, port)
        assert result.exit_code != 0 and "pong" not in text
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        server.kill()
        assert server.exit == sandbox.Exit(None, "SIGKILL")
    finally:
        ours.close()
        theirs.close()


def test_input_reaches_a_started_command_and_kill_ends_its_tree(tree):
    out = bytearray()
    token = "424244.31"
    script = f"sleep {token} & read line; echo got $line; sleep {token}"
    loopback = sandbox.Loopback()
    try:
        child = bwrap.start(["/bin/sh", "-c", script], tree.root, tree.settings(),
                            on_output=out.extend, loopback=loopback)
        child.write(b"hello\n")
        assert wait_until(lambda: b"got hello" in out, timeout=10)
        assert child.running and host_pids_with(token)
        child.kill()
        assert child.exit.signal == "SIGKILL"
        assert wait_until(lambda: not host_pids_with(token), timeout=2)
        with pytest.raises(sandbox.InputClosed):
            child.write(b"more\n")
    finally:
        loopback.close()


def test_a_tty_command_has_a_terminal_it_controls(tree):
    out = bytearray()
    script = ("import os, sys; print(os.isatty(0), os.ttyname(0) != '', "
              "os.tcgetpgrp(0) == os.getpgrp(), os.environ['TERM'], flush=True); "
              "print('hi', input('name? '))")
    child = bwrap.start(["python3", "-c", script], tree.root, tree.settings(),
                        on_output=out.extend, tty=True)
    assert wait_until(lambda: b"name? " in out, timeout=10)
    child.write(b"bob\n")
    assert child.wait(10) == sandbox.Exit(0, None)
    text = out.decode().replace("\r\n", "\n")
    assert text.startswith("True True True xterm-256color\n"), text
    assert "hi bob\n" in text


def test_a_closed_loopback_refuses_clearly(tree):
    loopback = sandbox.Loopback()
    loopback.close()
    with pytest.raises(sandbox.LoopbackError):
        bwrap.run(["true"], tree.root, tree.settings(), timeout=10, loopback=loopback)


def test_parallel_first_commands_make_one_namespace_pair(tree):
    loopback = sandbox.Loopback()
    try:
        runs = [gevent.spawn(bwrap.run, ["true"], tree.root, tree.settings(), timeout=20,
                             loopback=loopback) for _ in range(3)]
        gevent.joinall(runs, timeout=30, raise_error=True)
        assert [r.value for r in runs] == [sandbox.Exit(0, None)] * 3
        assert loopback._fds is not None
    finally:
        loopback.close()


def test_where_no_pair_can_be_made_each_command_gets_its_own_network(tree, monkeypatch):
    from term2acp.sandbox import loopback as module

    def refuse(bwrap):
        raise sandbox.LoopbackError(0, "no user namespaces for you")
    monkeypatch.setattr(module, "_make", refuse)
    loopback = sandbox.Loopback()
    out = bytearray()
    result = bwrap.run(["cat", "/proc/net/dev"], tree.root, tree.settings(),
                       on_output=out.extend, timeout=20, loopback=loopback)
    assert result == sandbox.Exit(0, None) and b"lo:" in out and b"eth" not in out
    assert loopback.unavailable == "no user namespaces for you"
    loopback.close()
