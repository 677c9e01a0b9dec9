"""turns/waiting.py: one word after a silence of the model, and nothing when it speaks."""

import time

import gevent
from gevent.event import Event

from term2acp.turns.waiting import watch


def stays(predicate, seconds):
    """True if ``predicate`` holds at every look for ``seconds`` (absence, polled)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not predicate():
            return False
        gevent.sleep(0.005)
    return predicate()


def test_waiting_notice_comes_once_per_request_however_long_the_silence():
    said, release = [], Event()
    noticed = Event()

    def silent_then_one():
        release.wait(5)
        yield "answer"

    def notify(text):
        said.append(text)
        noticed.set()

    reader = gevent.spawn(list, watch(silent_then_one(), 0.02, notify))
    assert noticed.wait(5)
    assert stays(lambda: len(said) == 1, 0.1)  # five more silences' worth: still one notice
    release.set()
    assert reader.get(timeout=5) == ["answer"]
    assert said == ["Still waiting for the model: nothing from it for 0.02 s. "
                    "Cancel to stop waiting."]


def test_waiting_notice_not_given_while_items_keep_coming_or_when_off():
    said = []

    def steady():
        for n in range(6):
            gevent.sleep(0.01)
            yield n

    assert list(watch(steady(), 0.5, said.append)) == list(range(6))
    assert list(watch(iter([1, 2]), 0, said.append)) == [1, 2]
    assert said == []


def test_waiting_clock_ends_with_the_stream_it_watches():
    said, release = [], Event()

    def held():
        release.wait(5)
        yield 1

    reader = gevent.spawn(list, watch(held(), 0.05, said.append))
    gevent.sleep(0)
    reader.kill()  # a cancelled turn: the generator closes, the clock with it
    assert stays(lambda: said == [], 0.1)  # two silences' worth: nothing


def test_something_is_said_within_two_seconds_when_nothing_has_come(monkeypatch):
    from term2acp.turns import waiting

    assert waiting.FIRST_WORD <= 2.0  # something is on screen within 2 s of a prompt
    monkeypatch.setattr(waiting, "FIRST_WORD", 0.02)
    said, release, told = [], Event(), Event()

    def silent_then_steady():
        release.wait(5)
        yield "a"
        yield "b"

    def notify(text):
        said.append(text)
        told.set()

    reader = gevent.spawn(list, watch(silent_then_steady(), 10, notify))
    assert told.wait(5)
    release.set()
    assert reader.get(timeout=5) == ["a", "b"]
    assert said == ["Waiting for the model's first words..."]
