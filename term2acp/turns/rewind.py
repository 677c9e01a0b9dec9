"""``/rewind``: list the session's turns; ``/rewind N`` takes back turn N and every later one.

Built on ``/undo`` (``turns/undo.py``): the turns are undone one by one from the last, each
as ``/undo`` does it (files put back through folder descriptors, all or nothing, the
session's processes stopped meanwhile) with the same report, and their messages leave the
model's conversation. A turn that cannot be undone stops the rewind there: the turns
before it stay, and the report says so.
"""

from term2acp.turns.undo import undo_last

WORDS = 60


def turns_left(session):
    """``(number, first words)`` of the session's turns not undone yet, in order."""
    return [(number, _words(prompt)) for number, prompt in session.store.turns.left(session.id)]


def _words(prompt):
    words = " ".join((prompt or "").split())
    return words if len(words) <= WORDS else words[:WORDS - 1] + "\u2026"


def listing(session):
    turns = turns_left(session)
    if not turns:
        return "Nothing to rewind: this session has no turn left to take back."
    lines = [f"{number}. {words or '(no text)'}" for number, words in turns]
    return ("Turns of this session (/rewind N takes back turn N and every later one, files "
            "and conversation):\n" + "\n".join(lines))


def rewind(session, argument):
    """The report of ``/rewind <argument>`` (the listing without one)."""
    if not argument.strip():
        return listing(session)
    try:
        target = int(argument.strip())
    except ValueError:
        return f"Usage: /rewind N (a turn number from /rewind); {argument.strip()!r} is not one."
    numbers = [number for number, _ in turns_left(session)]
    if target not in numbers:
        return (f"There is no turn {target} left to rewind. " + listing(session))
    reports = []
    for number in reversed([n for n in numbers if n >= target]):
        reports.append(undo_last(session))
        if number in (n for n, _ in turns_left(session)):  # it could not be undone
            reports.append(f"The rewind stopped at turn {number}: it and the turns before it "
                           "stay.")
            break
    return "\n\n".join(reports)
