"""Our files are the user's alone, through the launcher: a fresh data folder (and each
folder above it the agent makes), the store with its -wal and -shm files, the session
locks and the log file are 0700/0600 under a umask of 022; a store an older version left
readable by others is tightened, and the agent says so on stderr."""

import os
import stat

import pytest


def modes(base):
    """path -> mode of everything under ``base`` (itself included)."""
    out = {str(base): stat.S_IMODE(os.lstat(base).st_mode)}
    for folder, dirs, files in os.walk(base):
        for name in dirs + files:
            path = os.path.join(folder, name)
            out[path] = stat.S_IMODE(os.lstat(path).st_mode)
    return out


@pytest.fixture
def umask_022():
    old = os.umask(0o022)  # what most accounts have: the agent inherits it
    yield
    os.umask(old)


@pytest.mark.acp_process
def test_every_folder_and_file_the_agent_makes_is_private(acp_agent, acp_workspace, tmp_path,
                                                          umask_022):
    base = tmp_path / "data"
    home, log = base / "deep" / "term2acp", base / "logs" / "agent.log"
    os.makedirs(log.parent)
    os.chmod(log.parent, 0o755)
    agent = acp_agent(turns=[[{"text": "one"}]], env={"TERM2ACP_HOME": str(home),
                                                      "TERM2ACP_LOG_FILE": str(log)})
    sid = agent.new_session(acp_workspace)
    agent.prompt(sid, "a private prompt")
    store = home / "sessions.sqlite3"
    found = modes(base / "deep")
    for suffix in ("", "-wal", "-shm"):
        assert found[f"{store}{suffix}"] == 0o600, suffix
    assert str(home / "locks") in found and found[str(base / "deep")] == 0o700
    assert stat.S_IMODE(os.stat(log).st_mode) == 0o600
    agent.close()
    found = modes(base / "deep")
    shared = {p: oct(m) for p, m in found.items() if m & 0o077}
    assert not shared, shared


@pytest.mark.acp_process
def test_a_store_readable_by_others_is_tightened_with_a_notice(acp_agent, acp_workspace,
                                                               acp_env, umask_022):
    home = acp_env["TERM2ACP_HOME"]
    agent = acp_agent(turns=[[{"text": "one"}]])
    agent.prompt(agent.new_session(acp_workspace), "a private prompt")
    agent.close()
    store = os.path.join(home, "sessions.sqlite3")
    os.chmod(home, 0o755)  # as an older version left them
    for path in (store, store + "-wal", store + "-shm"):
        if os.path.exists(path):
            os.chmod(path, 0o644)
    agent = acp_agent(turns=[[{"text": "two"}]])
    agent.new_session(acp_workspace)  # the store is open
    assert agent.wait_stderr(f"the file {store} was readable by other users")
    assert agent.wait_stderr(f"the folder {home} was readable by other users")
    assert stat.S_IMODE(os.stat(home).st_mode) == 0o700
    for path in (store, store + "-wal", store + "-shm"):
        if os.path.exists(path):
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path
    agent.close()
