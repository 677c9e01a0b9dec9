"""sandbox/freezer.py: a command's whole tree stops (children that left its session and
group too) and runs again after thaw."""

import os
import subprocess

from term2acp.sandbox import freezer as freeze
from tests.unit.sandbox.support import wait_until


def state(pid):
    with open(f"/proc/{pid}/stat", "rb") as fh:
        stat = fh.read()
    return stat[stat.rfind(b")") + 2:][:1].decode()


def test_the_whole_tree_stops_and_runs_again():
    # the child leaves the group and the session (setsid) and forks on
    script = "setsid sh -c 'sleep 60 & sleep 60' & sleep 60"
    top = subprocess.Popen(["sh", "-c", script], start_new_session=True)
    try:
        assert wait_until(lambda: len(freeze.tree([top.pid])) >= 5, 10)
        pids = freeze.tree([top.pid])
        frozen = freeze.freeze([top.pid])
        assert set(frozen.pids) >= pids
        assert {state(pid) for pid in pids} == {"T"}
        frozen.thaw()
        assert wait_until(lambda: "T" not in {state(pid) for pid in pids}, 10)
    finally:
        for pid in freeze.tree([top.pid]):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        top.wait(10)
