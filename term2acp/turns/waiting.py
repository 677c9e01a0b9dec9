"""Feedback while the model is silent: one word when a request has sent nothing for a while.

A provider that accepted a request may take long before it answers (a cold or queued
server, a long prompt on a CPU); without a word the editor shows a blank turn for as long
as the read timeout. After ``wait_notice`` seconds (config file; 0: never) with nothing
from the model, the user is told once, as a thought (never text of the answer), that the
agent is still waiting; before that, when the model has sent nothing at all for
``FIRST_WORD`` seconds, that the agent is waiting for its first words (something is on
screen within 2 s of a prompt). The clock is a greenlet of its own: the turn's greenlet stays
blocked on the model's stream, so a cancel ends it at once, and the clock dies with it.
"""

import time

import gevent


FIRST_WORD = 2.0  # seconds before the first item: then the user is told the agent waits


def first_text():
    return "Waiting for the model's first words..."


def waiting_text(seconds):
    return (f"Still waiting for the model: nothing from it for {seconds:g} s. "
            "Cancel to stop waiting.")


def watch(items, seconds, notify):
    """Yield ``items``; call ``notify(text)`` once if ``seconds`` pass between two of them
    (or before the first), and before that once if the first takes ``FIRST_WORD`` s."""
    if not seconds:
        yield from items
        return
    last = [time.monotonic()]
    started = last[0]
    first = [FIRST_WORD < seconds]  # the first word is still to be told

    def clock():
        while True:
            now = time.monotonic()
            waiting_first = first[0] and last[0] == started  # nothing has come yet
            if waiting_first and now >= started + FIRST_WORD:
                notify(first_text())
                first[0] = waiting_first = False
            left = last[0] + seconds - now
            if left <= 0:
                notify(waiting_text(seconds))
                return
            if waiting_first:
                left = min(left, started + FIRST_WORD - now)
            gevent.sleep(max(left, 0.0))

    timer = gevent.spawn(clock)
    try:
        for item in items:
            last[0] = time.monotonic()
            yield item
    finally:
        timer.kill(block=False)
