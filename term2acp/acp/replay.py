"""A session's replay to its client (v2 ``session/resume`` with ``replayFrom``, v1
``session/load``): every journal record's updates, in order, a page at a time.

Most records are stored with their updates already encoded for each version
(``acp/v1/replay.py``'s ``forms``, the store's ``replay_forms``, run as the record is
written), and replay
streams those bytes with only the envelope and session id put around each: no decoding,
translating or encoding per update. They are the bytes the translation below and
:func:`~term2acp.rpc.messages.encode` make of the record at replay (pinned by
tests/unit/acp/test_replay.py), so what the client gets is what it got before. The other
records are translated at replay as before: rows written before the store kept encoded
updates, a compaction (its update depends on the client's capabilities), a plan, and in v1
a tool call that shows a terminal (its updates depend on the terminal's record).
"""

from term2acp.acp import methods
from term2acp.acp.handlers import replay_plan
from term2acp.acp.v2 import translate as v2
from term2acp.rpc.messages import encode

STORED = frozenset({"user_message", "agent_message", "agent_thought", "tool_call"})
TAIL = b"}}\n"  # closes "params" and the message


def v2_form(kind, payload):
    """The record's v2 update encoded (as :func:`encode` makes it, without its newline), or
    None when it is translated at replay."""
    if kind not in STORED:
        return None
    try:
        return encode(v2.replay_update(kind, payload))[:-1]
    except (ValueError, TypeError, KeyError):  # replay says what is wrong, as before
        return None


def head(session_id):
    """What goes before an encoded update: the ``session/update`` envelope as
    :func:`encode` makes it (``ClientProxy.update``: the same keys in the same order)."""
    line = encode({"jsonrpc": "2.0", "method": methods.SESSION_UPDATE,
                   "params": {"sessionId": session_id, "update": 0}})
    return line[:-len(b"0" + TAIL)]


def send(manager, client, session, version, translate):
    """The session's journal to ``client``: stored lines as they are, other records as
    ``translate(kind, payload)`` says (an iterable of updates)."""
    for piece in manager.journal(session, lines=(version, head(session.id), TAIL)):
        if type(piece) is bytes:
            client.lines(piece)
        else:
            for update in translate(*piece):
                client.update(session.id, update)


def v2_updates(compaction):
    def translate(kind, payload):
        update = replay_plan(payload, 2) if kind == "plan" else \
            v2.replay_update(kind, payload, compaction)
        return () if update is None else (update,)

    return translate
