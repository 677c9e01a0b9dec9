"""The messages of a session's next model request, kept between rounds.

A round appends what is new to the list the last one built (the history only grows by
appends between a compaction, an ``/undo`` or anything else that replaces the list, and
then it is built again): the per-round cost does not grow with the history (a C-level
copy of the list aside). What the list is: :func:`context.model_messages` of the history
(a leading compaction marker as the summary, merged into the user message after it), with
:func:`image_budget.bound` applied, which looks only at the messages that carry images.
The notes the history told the model (:func:`notes.told`) are kept the same way.
"""

from term2acp.turns import image_budget
from term2acp.turns.context import SUMMARY_HEADER, _clean, is_marker


class _Grown:
    """What was built from the first ``count`` messages of one history list."""

    def __init__(self, history):
        self.history, self.count, self.last = history, 0, None

    def fits(self, history):
        """True while ``history`` is the same list, grown by appends only."""
        return self.history is history and self.count <= len(history) and (
            self.count == 0 or history[self.count - 1] is self.last)

    def new(self, history):
        fresh = history[self.count:]
        self.count = len(history)
        self.last = history[-1] if history else None
        return fresh


class _View(_Grown):
    def __init__(self, history):
        super().__init__(history)
        self.summarised = bool(history) and is_marker(history[0])  # model_messages' cases
        self.raw, self.sent, self.images = [], [], []

    def extend(self, history):
        raw, sent = self.raw, self.sent
        for message in self.new(history):
            if not self.summarised:
                raw.append(message)
                sent.append(message)
            elif is_marker(message):
                entry = {"role": "user", "content": f"{SUMMARY_HEADER}\n"
                         f"{message.get('summary') or ''}", "_summary": True}
                raw.append(entry)
                sent.append(_clean(entry))
            elif raw and raw[-1].get("_summary") and message.get("role") == "user":
                raw[-1] = dict(message, content=raw[-1]["content"] + "\n\n" + message["content"])
                sent[-1] = _clean(raw[-1])
            else:
                raw.append(message)
                sent.append(_clean(message))
            if sent[-1].get("images") and (not self.images or self.images[-1] != len(sent) - 1):
                self.images.append(len(sent) - 1)


def _kept(session, attr, kind):
    """The session's ``kind`` kept in ``attr``, brought up to its history."""
    history = session.history
    kept = getattr(session, attr)
    if kept is None or not kept.fits(history):
        kept = kind(history)
        setattr(session, attr, kept)
    kept.extend(history)
    return kept


def request_messages(session):
    """The messages of the session's next model request (module docstring)."""
    view = _kept(session, "request_view", _View)
    return image_budget.bound(view.sent, indices=view.images)


class _Told(_Grown):
    def __init__(self, history):
        super().__init__(history)
        self.told = {}

    def extend(self, history):
        for message in self.new(history):
            noted = message.get("notes") if isinstance(message, dict) else None
            if isinstance(noted, dict):
                self.told.update(noted)


def told(session):
    """``key -> fingerprint`` the session's history told the model (the latest wins)."""
    return dict(_kept(session, "notes_told", _Told).told)
