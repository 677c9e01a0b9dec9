"""session/load's replay (``acp/replay.py``): a record's v1 updates encoded as it is
written, beside its v2 update (the store's ``replay_forms``), and the translation of the
records stored without them."""

from term2acp.acp.replay import STORED, v2_form
from term2acp.acp.v1 import translate
from term2acp.rpc.messages import encode


def forms(kind, payload):
    """``(v1, v2)``: the record's updates encoded for each version (each as :func:`encode`
    makes it, without its newline; several joined by one), or None for a version that
    translates it at replay. A v1 tool call showing a terminal is translated at replay
    (its updates depend on the terminal's record)."""
    if kind not in STORED:
        return None, None
    try:
        shows_terminal = kind == "tool_call" and any(
            isinstance(item, dict) and item.get("type") == "terminal"
            for item in payload.get("content") or ())
        updates = () if shows_terminal else tuple(translate.replay_record(kind, payload))
        first = b"".join(map(encode, updates))[:-1] if updates else None
    except (ValueError, TypeError, KeyError):  # replay says what is wrong, as before
        first = None
    return first, v2_form(kind, payload)


def v1_updates(terminal_records, compaction, terminal_meta):
    """``translate(kind, payload)`` for :func:`term2acp.acp.replay.send`."""
    terminals, journaled = translate.replay_terminals(terminal_records)
    journaled = journaled if terminal_meta else None
    return lambda kind, payload: translate.replay_record(kind, payload, compaction, terminals,
                                                         journaled)
