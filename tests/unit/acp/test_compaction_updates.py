"""Compaction on the wire: compaction_update only for clients that advertise it."""

from term2acp.acp.v2 import translate
from term2acp.acp.capabilities import advertises_compaction
from term2acp.acp.v1 import translate as v1
from term2acp.core import events as ev
from term2acp.testing import schema


def test_the_capability_is_session_compaction_an_object():
    assert advertises_compaction({"session": {"compaction": {}}})
    assert not advertises_compaction({"session": {"compaction": None}})
    assert not advertises_compaction({"session": {}}) and not advertises_compaction(None)


def test_live_updates_by_capability_valid_in_both_versions():
    done = ev.CompactionReported("cmp_1", "completed", summary="S", text="Context compacted.")
    for version, make in ((2, lambda e, s: translate.update_for(e, s)),
                          (1, lambda e, s: _v1(e, s))):
        update = make(done, True)
        assert update == {"sessionUpdate": "compaction_update", "compactionId": "cmp_1",
                          "status": "completed", "summary": [{"type": "text", "text": "S"}]}
        plain = make(done, False)
        assert plain["sessionUpdate"] == "agent_message_chunk"
        assert plain["content"]["text"] == "Context compacted."
        for item in (update, plain):
            message = {"jsonrpc": "2.0", "method": "session/update",
                       "params": {"sessionId": "s", "update": item}}
            assert schema.check_message(message, {}, version) == []


def _v1(event, supported):
    view = v1.SessionView()
    view.compaction = supported
    return view.updates(event)[0]


def test_an_interrupted_compaction_replays_as_cancelled():
    record = {"compaction_id": "cmp_2", "status": "in_progress", "summary": None,
              "error": None, "text": "Compacting the conversation..."}
    assert translate.replay_update("compaction", record, True)["status"] == "cancelled"
    assert list(v1.replay_updates([("compaction", record)], True))[0]["status"] == "cancelled"
