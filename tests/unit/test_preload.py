"""term2acp/preload.py: what only a prompt needs, prepared once initialize is answered."""

import logging
import time

from term2acp.preload import Preload
from term2acp.providers.catalog import Catalog
from term2acp.settings import Settings


def _preload(tmp_path):
    settings = Settings.load(env={"TERM2ACP_HOME": str(tmp_path / "home"),
                                  "TERM2ACP_CONFIG": str(tmp_path / "none.toml"),
                                  "TERM2ACP_LOCAL_MODEL": "off"})
    settings.provider, settings.model = "scripted", "scripted"
    return Preload(settings, Catalog(settings))


def test_the_first_wait_starts_the_preload_of_the_tools_and_the_sandbox(tmp_path):
    preload = _preload(tmp_path)
    assert not preload.ready.is_set()
    assert preload.wait(timeout=30) is True and preload.ready.is_set()
    tools = preload.tools()
    assert {"read_file", "grep", "apply_patch"} <= set(tools)
    assert preload.tools() is tools  # loaded once
    assert preload.sandbox_note().startswith(("available", "unavailable"))
    preload.close(timeout=5)  # the converter's import after the probe may still run


def test_a_failed_preload_is_logged_and_the_caller_loads_the_tools(tmp_path, monkeypatch,
                                                                    caplog):
    monkeypatch.setattr("term2acp.preload.MODULES", ("term2acp.no_such_module",))
    preload = _preload(tmp_path)
    with caplog.at_level(logging.WARNING, logger="term2acp.preload"):
        preload.start()
        assert preload.wait(timeout=30) is True  # ready all the same: nobody waits forever
    assert "preloading the tools failed" in caplog.text and "no_such_module" in caplog.text
    assert {"read_file", "grep"} <= set(preload.tools())
    preload.close(timeout=5)


def test_a_sandbox_probe_that_hangs_does_not_hold_the_preload_back(tmp_path, monkeypatch):
    """The probe runs beside the loading; a bwrap that never answers (a busy machine)
    delays neither ``ready`` (a new session's commands wait for it) nor the tools."""
    bwrap = tmp_path / "bwrap"
    bwrap.write_text("#!/bin/sh\nexec sleep 30\n")
    bwrap.chmod(0o700)
    monkeypatch.setenv("TERM2ACP_BWRAP", str(bwrap))
    preload = _preload(tmp_path)
    started = time.monotonic()
    assert preload.wait(timeout=20) is True
    assert time.monotonic() - started < 10  # PROBE_TIMEOUT: the probe itself gives up then
    assert {"read_file", "grep"} <= set(preload.tools())
    preload.close(timeout=5)  # the probe is stopped, its bwrap killed
