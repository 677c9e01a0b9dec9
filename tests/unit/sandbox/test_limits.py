"""Memory and tmpfs bounds inside the sandbox (issue 10, "low"): a 3 GiB allocation and
3 GiB written into /tmp, /dev/shm or $HOME fail inside the sandbox, while the agent (this
process) stays healthy and the next command runs normally."""

import os
import resource

import pytest

from term2acp import sandbox
from term2acp.sandbox import bwrap, cgroup
from tests.unit.sandbox.support import HostTree, needs_sandbox

pytestmark = needs_sandbox()

GIB3 = 3 * 1024 ** 3
ALLOCATE = ("python3 -c \"import sys; b = bytearray(%d); b[::4096] = b'x' * len(b[::4096]); "
            "print('ALLOCATED', len(b))\"" % GIB3)


@pytest.fixture
def tree():
    tree = HostTree()
    yield tree
    tree.cleanup()


def run(tree, script, settings, timeout=60):
    out = bytearray()
    result = sandbox.run(["/bin/sh", "-c", script], tree.root, settings, on_output=out.extend,
                         timeout=timeout)
    return result, out.decode("utf-8", "replace")


def healthy(tree, settings, rss_before):
    """The agent did not grow and the sandbox still runs commands."""
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    result, out = run(tree, "echo still-fine", settings)
    return grown_mb < 100 and result.exit_code == 0 and out == "still-fine\n"


def test_defaults_are_two_gib_of_memory_and_512_mib_of_tmpfs(tree):
    settings = tree.settings()
    assert (settings.sandbox.memory_mb, settings.sandbox.tmpfs_mb) == (2048, 512)
    assert bwrap.limits_of(settings).memory_bytes == 2 * 1024 ** 3
    argv = bwrap.build_argv(["true"], tree.root, settings)
    sized = [argv[i + 3] for i, a in enumerate(argv) if a == "--size"]
    if bwrap.probe().tmpfs_size:
        assert sized == ["/dev/shm", "/tmp", tree.home]
        assert {argv[i + 1] for i, a in enumerate(argv) if a == "--size"} == {str(512 << 20)}
    remounted = [argv[i + 1] for i, a in enumerate(argv) if a == "--remount-ro"]
    assert "/" in remounted and "/dev" in remounted


def test_a_3_gib_allocation_fails_with_the_default_limit(tree):
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    settings = tree.settings()
    result, out = run(tree, ALLOCATE, settings)
    assert "ALLOCATED" not in out
    assert result.exit_code != 0  # MemoryError (RLIMIT_DATA) or SIGKILL (cgroup OOM)
    if cgroup.memory_mechanism() == cgroup.MECHANISM_RLIMIT:
        assert "MemoryError" in out
    assert healthy(tree, settings, rss_before)


def test_a_smaller_configured_limit_holds_and_allows_less(tree):
    settings = tree.settings(sandbox={"memory_mb": 256})
    small = "python3 -c \"b = bytearray(64 << 20); print('SMALL', len(b))\""
    big = "python3 -c \"b = bytearray(512 << 20); print('BIG', len(b))\""
    result, out = run(tree, f"{small}; {big}", settings)
    assert "SMALL 67108864" in out and "BIG" not in out


@pytest.mark.parametrize("where", ["/tmp", "/dev/shm", "$HOME"])
def test_3_gib_into_a_sandbox_tmpfs_fails(tree, where):
    if not bwrap.probe().tmpfs_size:
        pytest.skip("this bubblewrap cannot bound tmpfs sizes")
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    settings = tree.settings(sandbox={"tmpfs_mb": 64})
    script = (f"head -c {GIB3} /dev/zero > {where}/big && echo WROTE-ALL; "
              f"du -m {where}/big; rm -f {where}/big")
    result, out = run(tree, script, settings)
    assert "WROTE-ALL" not in out and "No space left on device" in out
    assert int(out.strip().splitlines()[-1].split()[0]) <= 64
    assert healthy(tree, settings, rss_before)


def test_3_gib_into_tmp_fails_with_the_default_size(tree):
    settings = tree.settings()
    if not bwrap.probe().tmpfs_size:
        pytest.skip("this bubblewrap cannot bound tmpfs sizes")
    result, out = run(tree, f"head -c {GIB3} /dev/zero > /tmp/big || echo FULL; du -m /tmp/big",
                      settings)
    assert "FULL" in out and int(out.strip().splitlines()[-1].split()[0]) <= 512


def test_other_writable_tmpfs_are_read_only(tree):
    """The sandbox's root, /dev and /run are tmpfs too: none may take writes (or memory)."""
    result, out = run(tree, "for d in / /dev /run /etc/ssl/private; do "
                            "echo x > $d/t2acp-probe && echo WROTE $d; done; true",
                      tree.settings())
    assert "WROTE" not in out
    assert out.count("Read-only file system") + out.count("No such file") >= 3


def test_memory_mechanism_is_reported():
    mechanism = sandbox.memory_mechanism()
    assert mechanism in (cgroup.MECHANISM_CGROUP, cgroup.MECHANISM_RLIMIT)
    if not cgroup.RunGroup.supported() or not os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        assert mechanism == cgroup.MECHANISM_RLIMIT  # cgroup v1 or no cgroup: RLIMIT_DATA
