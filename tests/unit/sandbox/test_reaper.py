"""core/reaper.py: each sandbox's first process is recorded; a start-up sweep kills
what agents that are gone recorded, and nothing else."""

import os

import pytest

from term2acp.core import reaper
from term2acp.sandbox import process
from tests.unit.sandbox.support import host_pids_with, wait_until


@pytest.fixture
def sleeper():
    started = []

    def start(token):
        child = process.start(["/bin/sh", "-c", f"exec sleep {token}"])
        assert wait_until(lambda: host_pids_with(token), timeout=5)
        started.append(child)
        return child
    yield start
    for child in started:
        child.kill()


def write_record(data_dir, agent, entries):
    folder = os.path.join(data_dir, reaper.FOLDER)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, agent)
    with open(path, "w") as fh:
        fh.write("".join(f"{pid} {start}\n" for pid, start in entries))
    return path


def test_a_dead_agents_processes_are_killed_and_its_record_removed(tmp_path, sleeper):
    left = sleeper("60.7171")
    reused = sleeper("60.7172")  # its pid is in the record with another start time
    path = write_record(str(tmp_path), "999999999-1", [
        (left.pid, reaper._started(left.pid)), (reused.pid, reaper._started(reused.pid) + 1)])
    assert reaper.sweep(str(tmp_path)) == 1
    assert left.wait(5).signal == "SIGKILL"
    assert reused.running and host_pids_with("60.7172")
    assert not os.path.exists(path)


def test_a_live_agents_record_is_left_alone(tmp_path, sleeper):
    mine = sleeper("60.7173")
    me = f"{os.getpid()}-{reaper._started(os.getpid())}"
    path = write_record(str(tmp_path), me, [(mine.pid, reaper._started(mine.pid))])
    assert reaper.sweep(str(tmp_path)) == 0
    assert mine.running and os.path.exists(path)


def test_records_are_appended_and_pruned(tmp_path, monkeypatch, sleeper):
    monkeypatch.setattr(reaper, "_own", {})
    monkeypatch.setattr(reaper, "PRUNE_EVERY", 3)
    alive = sleeper("60.7174")
    gone = process.start(["true"])
    gone.wait(5)
    reaper.record(str(tmp_path), alive.pid)
    reaper.record(str(tmp_path), gone.pid)  # reaped already: not recorded
    own = reaper._own[str(tmp_path)]
    assert reaper._read(own.path) == [(alive.pid, reaper._started(alive.pid))]
    dying = sleeper("60.7175")
    reaper.record(str(tmp_path), dying.pid)
    dying.kill()
    reaper.record(str(tmp_path), alive.pid)  # the third: the file is rewritten, live only
    assert reaper._read(own.path) == [(alive.pid, reaper._started(alive.pid))] * 2
    reaper._unlink(own.path)
