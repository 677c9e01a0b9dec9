"""core/pacing.breathe: a busy loop that yields with it lets the hub poll for I/O.

With ``gevent.sleep(0)`` two greenlets taking turns run back to back from the loop's
callback queue, and a greenlet waiting for a readable pipe only runs once they stop (or
after gevent's periodic check): stdin went unread during fast model streams (issue 16).
"""

import os

import gevent
from gevent.socket import wait_read

from term2acp.core.pacing import breathe

ROUNDS = 200


def _turn_taking(yield_once):
    """Two busy greenlets yield ROUNDS times each while a third waits on a pipe that is
    already readable; returns how many rounds had run when the reader got in."""
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"x")
    rounds = [0]
    seen = []

    def reader():
        wait_read(read_fd)
        seen.append(rounds[0])

    def busy():
        for _ in range(ROUNDS):
            rounds[0] += 1
            yield_once()

    try:
        waiting = gevent.spawn(reader)
        gevent.sleep(0)  # the reader is now waiting for I/O
        gevent.joinall([gevent.spawn(busy), gevent.spawn(busy), waiting], timeout=10)
        return seen[0]
    finally:
        os.close(read_fd)
        os.close(write_fd)


def test_breathe_lets_a_reader_in_while_greenlets_take_turns():
    assert _turn_taking(breathe) < 10


def test_sleep_zero_is_what_starved_it():
    # the behaviour breathe() works around (gevent's, pinned so a change is noticed)
    assert _turn_taking(lambda: gevent.sleep(0)) > 10


def test_overdue_counts_the_work_since_the_hub_last_polled_whoever_did_it():
    import time

    from term2acp.core.pacing import overdue

    def spin(seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass

    breathe()
    assert not overdue(0.05)
    other = gevent.spawn(spin, 0.06)  # another greenlet's work, in the same loop pass
    gevent.sleep(0)
    assert other.dead and overdue(0.05)  # this greenlet did nothing, the hub did not poll
    breathe()
    assert not overdue(0.05)


def test_launches_started_together_leave_the_hub_free_between_them():
    """sh holds the hub until a child has exec'd: three launches asked for at once go one
    at a time, with the hub free in between (core/pacing.spaced), so a greenlet waiting
    for input gets in after the first at the latest, not after all three."""
    from term2acp.sandbox import process

    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"x")
    launched, seen, children = [], [], []

    def reader():
        wait_read(read_fd)
        seen.append(len(launched))

    def launch():
        children.append(process.start(["/bin/true"], on_launch=launched.append))

    try:
        waiting = gevent.spawn(reader)
        gevent.sleep(0)  # the reader is now waiting for I/O
        gevent.joinall([gevent.spawn(launch) for _ in range(3)] + [waiting], timeout=10)
        assert len(launched) == 3 and seen in ([0], [1])  # (0: the hub was overdue first)
    finally:
        for child in children:
            child.kill()
        os.close(read_fd)
        os.close(write_fd)
