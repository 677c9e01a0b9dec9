"""The attack set, run for real as root where possible. Each test checks the HOST afterwards.

Targets live under /var/tmp (not /tmp, which is a private tmpfs in the sandbox), so a write
that escaped would land on the real host filesystem.
"""

import os
import pwd
import pytest
from gevent.server import StreamServer

from term2acp import sandbox
from tests.unit.sandbox.support import HostTree, marker, needs_sandbox

pytestmark = needs_sandbox()


@pytest.fixture
def tree():
    tree = HostTree()
    yield tree
    tree.cleanup()


def run(tree, script, settings=None, timeout=30):
    """Run ``script`` under sh in the sandbox; ``(Exit, output text)``."""
    out = bytearray()
    result = sandbox.run(["/bin/sh", "-c", script], tree.root, settings or tree.settings(),
                         on_output=out.extend, timeout=timeout)
    return result, out.decode("utf-8", "replace")


def assert_absent(path):
    present = os.path.lexists(path)
    if present:
        os.remove(path)
    assert not present, f"the sandbox wrote {path} on the host"


def test_writes_inside_the_root_land_on_the_host(tree):
    result, _ = run(tree, "echo hello > inside.txt && mkdir -p sub && echo x > sub/y")
    assert result.exit_code == 0
    with open(os.path.join(tree.root, "inside.txt")) as fh:
        assert fh.read() == "hello\n"
    assert os.path.isfile(os.path.join(tree.root, "sub", "y"))


def test_write_to_etc(tree):
    name = marker()
    result, out = run(tree, f"echo pwned > /etc/{name}")
    assert result.exit_code != 0 and "Read-only" in out
    assert_absent(f"/etc/{name}")


def test_write_to_home(tree):
    name = marker()
    real_home = pwd.getpwuid(os.getuid()).pw_dir
    result, _ = run(tree, f'echo pwned > "$HOME/{name}"; echo pwned > "{real_home}/{name}"')
    assert result.exit_code != 0
    assert_absent(os.path.join(tree.home, name))
    assert_absent(os.path.join(real_home, name))


def test_write_to_a_sibling_of_the_root(tree):
    name = marker()
    result, _ = run(tree, f"echo pwned > {tree.path('sibling', name)}")
    assert result.exit_code != 0
    assert_absent(tree.path("sibling", name))


def test_write_via_dotdot(tree):
    name = marker()
    result, _ = run(tree, f"echo pwned > ../sibling/{name}; echo pwned > ../{name}")
    assert result.exit_code != 0
    assert_absent(tree.path("sibling", name))
    assert_absent(tree.path(name))


def test_write_via_symlink_inside_the_root(tree):
    name = marker()
    victim = tree.path("sibling", "victim.txt")
    with open(victim, "w") as fh:
        fh.write("original\n")
    os.symlink(tree.path("sibling"), os.path.join(tree.root, "dirlink"))
    os.symlink(victim, os.path.join(tree.root, "filelink"))
    result, _ = run(tree, f"echo pwned > dirlink/{name}; echo pwned >> filelink; "
                          "ln -s /etc etclink; echo pwned > etclink/" + name)
    assert result.exit_code != 0
    assert_absent(tree.path("sibling", name))
    assert_absent(f"/etc/{name}")
    with open(victim) as fh:
        assert fh.read() == "original\n"


def test_write_via_proc_self_root(tree):
    name = marker()
    target = tree.path("sibling", name)
    result, _ = run(tree, f"echo pwned > /proc/self/root{target}; "
                          f"echo pwned > /proc/1/root{target}; "
                          f"echo pwned > /proc/self/cwd/../{name}")
    assert result.exit_code != 0
    assert_absent(target)
    assert_absent(tree.path(name))


def test_remount_rw_fails(tree):
    name = marker()
    result, out = run(tree, "mount -o remount,rw / && echo REMOUNTED; "
                            f"mount --bind {tree.path('sibling')} {tree.root} && echo BOUND; "
                            f"echo pwned > /etc/{name}")
    assert "REMOUNTED" not in out and "BOUND" not in out
    assert result.exit_code != 0
    assert_absent(f"/etc/{name}")


def test_unshare_cannot_regain_capabilities(tree):
    name = marker()
    script = (f"unshare -r -m sh -c 'mount -o remount,rw / ; echo pwned > /etc/{name}' "
              "&& echo UNSHARED; unshare -U -r true && echo USERNS; "
              "grep CapEff /proc/self/status")
    result, out = run(tree, script)
    assert "UNSHARED" not in out and "USERNS" not in out
    assert "CapEff:\t0000000000000000" in out
    assert_absent(f"/etc/{name}")


def test_reading_a_sibling_project_fails_but_system_files_work(tree):
    with open(tree.path("sibling", "readme.txt"), "w") as fh:
        fh.write("sibling secret\n")
    result, out = run(tree, f"cat {tree.path('sibling', 'readme.txt')}; echo; "
                            "head -c 5 /etc/passwd; ls /usr/bin/env")
    assert "sibling secret" not in out
    assert "No such file" in out and "/usr/bin/env" in out


def test_credentials_and_agent_dirs_are_not_visible(tree):
    os.makedirs(os.path.join(tree.home, ".ssh"))
    secrets = {os.path.join(tree.home, ".ssh", "id_rsa"): "PRIVATE-KEY-MATERIAL",
               os.path.join(tree.home, ".netrc"): "machine x password NETRC-SECRET",
               tree.path("data", "sessions.db"): "DATA-DIR-SECRET",
               tree.path("config", "term2acp", "config.toml"): "# CONFIG-DIR-SECRET\n"}
    for path, text in secrets.items():
        with open(path, "w") as fh:
            fh.write(text)
    script = "; ".join(f"cat {p} 2>/dev/null" for p in secrets)
    _, out = run(tree, script + "; env")
    for text in secrets.values():
        assert text.strip("# \n") not in out
    assert "sk-secret-test" not in out and "ghp-secret-test" not in out
    hidden_dirs = [os.path.join(tree.home, ".ssh"), tree.path("data"),
                   tree.path("config", "term2acp")]
    _, listing = run(tree, "; ".join(f"ls -A {d} 2>/dev/null" for d in hidden_dirs))
    assert listing == ""


def test_loopback_server_is_unreachable_without_network(tree):
    accepted = []
    server = StreamServer(("127.0.0.1", 0), lambda sock, addr: accepted.append(addr))
    server.start()
    try:
        port = server.address[1]
        probe = (f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}),"
                 " timeout=3); print('CONNECTED')\"")
        result, out = run(tree, probe)
        assert "CONNECTED" not in out and result.exit_code != 0
        assert accepted == []
        result, out = run(tree, probe, settings=tree.settings(network=True))
        assert "CONNECTED" in out  # the control: the same probe works with network on
    finally:
        server.stop(timeout=1)


def test_host_unix_sockets_under_run_are_hidden(tree):
    _, out = run(tree, "ls -A /run | wc -l")
    assert out.strip() == "0"


def test_sandbox_has_its_own_tmp(tree):
    name = marker()
    result, _ = run(tree, f"echo x > /tmp/{name} && cat /tmp/{name}")
    assert result.exit_code == 0
    assert_absent(f"/tmp/{name}")
