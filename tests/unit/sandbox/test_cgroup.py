"""sandbox/cgroup.py: which memory mechanism applies, and the cgroup v2 files it writes.

The cgroup v2 path cannot run on a cgroup v1 host, so its file handling is checked against
a directory laid out like a cgroup; the choice between cgroup and RLIMIT_DATA is checked in
real forked children (``ulimit -d`` reports what the child got).
"""

import os

from term2acp.sandbox import cgroup, process


class FakeGroup:
    def __init__(self, memory):
        self.memory = memory
        self.joined = False

    def join(self):
        self.joined = True

    def close(self):
        pass


def data_limit(limits, group, monkeypatch):
    monkeypatch.setattr(cgroup.Limits, "group", lambda self: group)
    out = bytearray()
    process.run(["/bin/sh", "-c", "ulimit -d"], on_output=out.extend, timeout=10,
                limits=limits)
    return out.decode().strip()


def test_rlimit_data_when_no_cgroup_carries_memory(monkeypatch):
    limits = cgroup.Limits(pids_max=64, memory_bytes=256 << 20)
    assert data_limit(limits, None, monkeypatch) == str(256 << 10)  # KiB
    assert data_limit(limits, FakeGroup(memory=False), monkeypatch) == str(256 << 10)


def test_no_rlimit_when_the_cgroup_carries_memory(monkeypatch):
    limits = cgroup.Limits(pids_max=64, memory_bytes=256 << 20)
    assert data_limit(limits, FakeGroup(memory=True), monkeypatch) == "unlimited"


def test_no_memory_limit_configured_means_none(monkeypatch):
    assert data_limit(cgroup.Limits(pids_max=64), None, monkeypatch) == "unlimited"


def test_cgroup_v2_memory_files(tmp_path):
    group = tmp_path / "run-1"
    group.mkdir()
    assert not cgroup._limit_memory(str(group), 1 << 30)  # no memory.max: not delegated
    for name in ("memory.max", "memory.swap.max", "memory.oom.group"):
        (group / name).write_text("")  # cgroup files take a write, no truncation
    assert cgroup._limit_memory(str(group), 1 << 30)
    assert (group / "memory.max").read_text() == str(1 << 30)
    assert (group / "memory.swap.max").read_text() == "0"
    assert (group / "memory.oom.group").read_text() == "1"


def test_memory_delegation_is_read_from_subtree_control(tmp_path):
    assert not cgroup._delegates_memory(str(tmp_path))  # cgroup v1: no such file
    (tmp_path / "cgroup.subtree_control").write_text("cpu pids\n")
    assert not cgroup._delegates_memory(str(tmp_path))
    (tmp_path / "cgroup.subtree_control").write_text("cpu memory pids\n")
    assert cgroup._delegates_memory(str(tmp_path))


def test_mechanism_on_this_host_matches_the_hierarchy():
    v2_memory = cgroup.RunGroup.memory_supported()
    expected = cgroup.MECHANISM_CGROUP if v2_memory else cgroup.MECHANISM_RLIMIT
    assert cgroup.memory_mechanism() == expected
    if not os.path.exists("/sys/fs/cgroup/cgroup.controllers"):  # no unified root
        assert expected == cgroup.MECHANISM_RLIMIT


def test_the_sweep_kills_what_a_dead_agent_left_in_its_run_groups():
    import pytest

    from tests.unit.sandbox.support import host_pids_with, wait_until

    if not cgroup.RunGroup.supported():
        pytest.skip("no writable pids cgroup on this machine")
    dead = process.start(["true"])
    dead.wait(10)  # a pid no agent has any more
    # a parent of the test's own: the agents other tests start sweep the shared one
    parent = os.path.join(cgroup.RunGroup._parent, f"test-{os.getpid()}-{dead.pid}")
    os.mkdir(parent)
    try:
        cgroup._write(os.path.join(parent, "cgroup.subtree_control"), "+pids")
    except OSError:
        pass  # cgroup v1: nested groups have every controller
    left = os.path.join(parent, f"run-{dead.pid}-1")
    os.mkdir(left)
    token = "60.6161"
    orphan = process.start(["/bin/sh", "-c", f"exec sleep {token}"],
                           limits=FixedLimits(cgroup.RunGroup(left)))
    try:
        assert wait_until(lambda: host_pids_with(token), timeout=5)
        cgroup._sweep(parent)
        assert wait_until(lambda: not host_pids_with(token), timeout=2)
        assert orphan.wait(5).signal == "SIGKILL"
        cgroup.RunGroup(left).close()
        assert not os.path.exists(left)
    finally:
        orphan.kill()
        cgroup.RunGroup(left).close()
        cgroup._rmdir(parent)


class FixedLimits(cgroup.Limits):
    """Limits whose group is the one given (closed by the test, not by the process)."""

    def __init__(self, group):
        super().__init__(pids_max=64)
        self._fixed = group

    def group(self):
        return None

    def apply_in_child(self, group):
        self._fixed.join()
