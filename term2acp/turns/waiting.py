"""Feedback while the model is silent: one word when a request has sent nothing for a while.

A provider that accepted a request may take long before it answers (a cold or queued
server, a long prompt on a CPU); without a word the editor shows a blank turn for as long
as the read timeout. After ``wait_notice`` seconds (config file; 0: never) with nothing
from the model, the user is told once, as a thought (never text of the answer), that the
agent is still waiting. The clock is a greenlet of its own: the turn's greenlet stays
blocked on the model's stream, so a cancel ends it at once, and the clock dies with it.
"""

import time

import gevent


def waiting_text(seconds):
    return (f"Still waiting for the model: nothing from it for {seconds:g} s. "
            "Cancel to stop waiting.")


def watch(items, seconds, notify):
    """Yield ``items``; call ``notify(text)`` once if ``seconds`` pass between two of them
    (or before the first)."""
    if not seconds:
        yield from items
        return
    last = [time.monotonic()]

    def clock():
        while True:
            left = last[0] + seconds - time.monotonic()
            if left <= 0:
                notify(waiting_text(seconds))
                return
            gevent.sleep(left)

    timer = gevent.spawn(clock)
    try:
        for item in items:
            last[0] = time.monotonic()
            yield item
    finally:
        timer.kill(block=False)
