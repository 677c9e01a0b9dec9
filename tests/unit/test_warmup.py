"""term2acp/warmup.py: the start-up work done in native threads, handed to the hub."""

import pytest

from term2acp.sessions.errors import StoreRecovered
from term2acp.settings import Settings
from term2acp.warmup import Warmup


def _warmed(tmp_path, version=2):
    settings = Settings(data_dir=str(tmp_path / "data"))
    warmup = Warmup(settings)
    after = []
    assert warmup.wait(timeout=0) is True  # nothing scheduled: nothing to wait for
    warmup.schedule(version, then=lambda: after.append("then"))
    assert warmup.wait(timeout=30) is True
    warmup.greenlet.join(timeout=30)
    assert after == ["then"]
    return warmup


def test_the_warm_up_opens_the_store_and_loads_the_tools_off_the_hub(tmp_path):
    warmup = _warmed(tmp_path)
    store = warmup.take_store()
    assert store is not None and store.is_open and warmup.take_store() is None
    assert store.list_sessions()[0] == []
    store.close()
    tools = warmup.take_tools()
    assert {"read_file", "grep"} <= set(tools) and warmup.take_tools() is None


def test_a_damaged_store_moved_aside_by_the_warm_up_is_told_on_first_use(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "sessions.sqlite3").write_bytes(b"")
    store = _warmed(tmp_path, version=1).take_store()
    with pytest.raises(StoreRecovered, match="damaged-"):
        store.open()
    assert store.open() is store  # told once; the fresh store works
    store.close()
