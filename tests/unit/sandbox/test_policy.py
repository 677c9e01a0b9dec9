"""Issue 10 items 6-8, for real: what the sandbox sees of the home directory, other
projects, root-only files and host sockets/FIFOs, and what it still sees (the workspace,
toolchains, configured read paths). Every attack is checked on the HOST side too.

Each test builds its tree before the first command (the view's scans are cached per
workspace); the home is a temporary ``$HOME`` under /var/tmp, never the real one.
"""

import os
import socket
import stat

import gevent
import pytest

from term2acp import sandbox
from term2acp.sandbox import view
from term2acp.tools.base import ToolError
from term2acp.tools.shell import ShellTool
from tests.unit.sandbox.support import HostTree, marker, needs_sandbox, wait_until

pytestmark = needs_sandbox()

SECRET = "TOKEN-t2acp-should-not-leak"


@pytest.fixture
def tree():
    tree = HostTree()
    yield tree
    tree.cleanup()


def run(tree, script, settings=None, root=None, timeout=30):
    out = bytearray()
    result = sandbox.run(["/bin/sh", "-c", script], root or tree.root,
                         settings or tree.settings(), on_output=out.extend, timeout=timeout)
    return result, out.decode("utf-8", "replace")


class UnixServer:
    """A host unix socket that records connections and answers each one with PONG."""

    def __init__(self, path):
        self.path, self.accepted = path, []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        os.chmod(path, 0o777)  # even a world-writable socket must stay out of reach
        self.sock.listen(8)
        self.loop = gevent.spawn(self._serve)

    def _serve(self):
        while True:
            conn, _ = self.sock.accept()
            self.accepted.append(conn.recv(64))
            conn.sendall(b"PONG\n")
            conn.close()

    def close(self):
        self.loop.kill(block=True, timeout=2)
        self.sock.close()


def exchange(path):
    """Shell snippet: connect to ``path``, send PING, print EXCHANGED and the answer."""
    code = ("import socket,sys\n"
            "s=socket.socket(socket.AF_UNIX)\n"
            "s.settimeout(5)\n"
            f"s.connect({path!r}); s.sendall(b'PING'); print('EXCHANGED', s.recv(16))")
    return f"python3 -c \"{code}\""


def test_host_sockets_outside_the_workspace_are_unreachable(tree):
    places = [tree.path("sibling", "app.sock"),  # another project
              tree.path("home", "agent.sock"),  # the home directory itself
              tree.path("home", ".local", "share", "app", "run.sock"),  # inside a toolchain
              tree.path("extra", "svc", "x.sock")]  # inside a configured read path
    for place in places:
        os.makedirs(os.path.dirname(place), exist_ok=True)
    servers = [UnixServer(p) for p in places]
    settings = tree.settings(sandbox={"read_paths": [tree.path("extra")]})
    try:
        for place in places:
            result, out = run(tree, exchange(place), settings)
            assert result.exit_code != 0 and "EXCHANGED" not in out, (place, out)
        _, control = run(tree, f"ls {tree.path('extra', 'svc')} && echo LISTED", settings)
        assert "LISTED" in control  # the read path itself is visible; only its socket is not
        assert all(s.accepted == [] for s in servers)
    finally:
        for server in servers:
            server.close()


def test_host_fifos_outside_the_workspace_cannot_be_written(tree):
    places = [tree.path("sibling", "pipe"), tree.path("home", ".local", "state", "pipe"),
              tree.path("home", "pipe")]
    readers = []
    for place in places:
        os.makedirs(os.path.dirname(place), exist_ok=True)
        os.mkfifo(place)
        readers.append(os.open(place, os.O_RDONLY | os.O_NONBLOCK))  # a writer never blocks
    try:
        # ($HOME is a private tmpfs: a write there may create a file, but never reaches
        # the host's FIFO)
        script = "; ".join(f"[ -p {p} ] && echo VISIBLE; echo {SECRET} > {p}" for p in places)
        _, out = run(tree, script)
        assert "VISIBLE" not in out
        for fd in readers:
            try:
                assert os.read(fd, 100) == b""
            except BlockingIOError:
                pass  # nothing was ever written
    finally:
        for fd in readers:
            os.close(fd)


def test_sockets_and_fifos_inside_the_workspace_work(tree):
    server = UnixServer(os.path.join(tree.root, "dev.sock"))
    try:
        result, out = run(tree, exchange(os.path.join(tree.root, "dev.sock")) + "; "
                          "mkfifo pipe && { cat pipe > got & echo through > pipe; wait; }; "
                          "cat got")
        assert result.exit_code == 0, out
        assert "EXCHANGED b'PONG\\n'" in out and "through" in out
        assert wait_until(lambda: server.accepted == [b"PING"], timeout=5)
    finally:
        server.close()
    assert stat.S_ISFIFO(os.lstat(os.path.join(tree.root, "pipe")).st_mode)


def test_home_other_projects_and_root_only_files_are_unreadable(tree):
    files = [tree.write("home/.bashrc", f"export GH={SECRET}\n"),
             tree.write("home/.env", f"API={SECRET}\n"),
             tree.write("home/.config/x/auth.json", f'{{"t": "{SECRET}"}}'),
             tree.write("home/notes/todo.txt", SECRET),  # the rest of the home
             tree.write("sibling/src/main.py", f"KEY = '{SECRET}'")]  # another project
    script = "; ".join(f"cat {p}" for p in files) + "; cat /etc/shadow /etc/gshadow; echo end"
    result, out = run(tree, script)
    assert "end" in out
    assert SECRET not in out
    assert "root:" not in out  # no line of /etc/shadow or /etc/gshadow
    _, listing = run(tree, f"ls -A {tree.home} {tree.path('sibling')} 2>/dev/null")
    assert "notes" not in listing and "src" not in listing


@pytest.fixture
def root_only_etc_file():
    """A root-only file with SECRET in the host's /etc, seen by a fresh scan; removed after."""
    if os.geteuid() != 0:
        pytest.skip("needs root to place a root-only file in /etc")
    path = f"/etc/{marker()}"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, SECRET.encode())
        os.close(fd)
        view.clear_cache()
        yield path
    finally:
        if os.path.lexists(path):
            os.remove(path)
        view.clear_cache()


def test_any_root_only_file_in_etc_is_masked(tree, root_only_etc_file):
    _, out = run(tree, f"cat {root_only_etc_file}; cat /etc/hostname /etc/passwd >/dev/null "
                       "&& echo ok")
    assert SECRET not in out and "ok" in out  # world-readable /etc stays readable


def test_a_masked_file_removed_since_the_scan_does_not_break_commands(tree, root_only_etc_file):
    _, out = run(tree, f"cat {root_only_etc_file}; echo first")
    assert SECRET not in out and "first" in out
    os.remove(root_only_etc_file)  # the scan's result is still cached
    result, out = run(tree, "echo second")
    assert "second" in out and "Can't create file" not in out, out


def test_toolchains_and_read_paths_are_readable_not_writable(tree):
    tool = tree.write("home/.pyenv/bin/hello", "#!/bin/sh\necho hello from pyenv\n", 0o755)
    tree.write("home/.gitconfig", "[user]\n\tname = Someone\n")
    tree.write("shared/shared.txt", "shared data\n")
    tree.write("data/sessions.db", SECRET)  # the agent's own data dir: never a read path
    name = marker()
    settings = tree.settings(sandbox={"read_paths": [tree.path("shared"), "~/.gitconfig",
                                                     tree.path("data")]})
    result, out = run(tree, f"{tool}; cat ~/.gitconfig {tree.path('shared', 'shared.txt')} "
                            f"{tree.path('data', 'sessions.db')}; "
                            f"touch {tree.home}/.pyenv/{name} || echo NOWRITE", settings)
    assert "hello from pyenv" in out and "name = Someone" in out and "shared data" in out
    assert SECRET not in out
    assert "NOWRITE" in out
    assert not os.path.exists(tree.path("home", ".pyenv", name))


def test_toolchains_are_configurable(tree):
    tree.write("home/.pyenv/version", "3.11\n")
    tree.write("home/.sdkman/candidates", "java\n")
    settings = tree.settings(sandbox={"toolchains": [".sdkman"]})
    _, out = run(tree, "cat ~/.sdkman/candidates ~/.pyenv/version", settings)
    assert "java" in out and "3.11" not in out


def test_a_sensitive_read_path_is_not_shown(tree):
    tree.write("home/.ssh/id_rsa", SECRET)
    tree.write("home/notes.txt", "my notes\n")
    settings = tree.settings(sandbox={"read_paths": ["~/.ssh", "~"]})
    result, out = run(tree, "cat ~/.ssh/id_rsa ~/notes.txt; echo end", settings)
    assert "my notes" in out and "end" in out and SECRET not in out  # ~ shown, ~/.ssh not
    _, listing = run(tree, "ls -A ~/.ssh", settings)
    assert listing == ""


def test_root_at_home_masks_credentials_and_startup_files(tree):
    secrets = [tree.write("home/.ssh/id_rsa", SECRET), tree.write("home/.bashrc", SECRET),
               tree.write("home/.profile", SECRET), tree.write("home/.env", SECRET),
               tree.write("home/.env.local", SECRET), tree.write("home/.netrc", SECRET),
               tree.write("home/.config/tool/auth.json", SECRET),
               tree.write("home/.local/share/term2acp/x.db", SECRET)]  # data dir inside home
    tree.write("home/project/readme.md", "project readme\n")
    settings = tree.settings()
    settings.data_dir = tree.path("home", ".local", "share", "term2acp")
    name = marker()
    script = ("; ".join(f"cat {p}" for p in secrets) +
              f"; cat project/readme.md; echo x >> .bashrc; touch {name}; echo end")
    result, out = run(tree, script, settings, root=tree.home)
    assert "project readme" in out and "end" in out
    assert SECRET not in out
    _, listing = run(tree, "ls -A .ssh .local/share/term2acp", settings, root=tree.home)
    assert "id_rsa" not in listing and "x.db" not in listing
    assert not os.path.exists(tree.path("home", name))  # a home root stays read-only
    with open(tree.path("home", ".bashrc")) as fh:
        assert fh.read() == SECRET


def test_credentials_created_during_a_session_are_masked_at_once(tree):
    result, _ = run(tree, "true", root=tree.home)  # plan cached for this root
    assert result.exit_code == 0
    tree.write("home/.env", SECRET)
    _, out = run(tree, "cat .env; echo end", root=tree.home)
    assert "end" in out and SECRET not in out


def test_root_slash_is_refused_clearly(tree):
    with pytest.raises(sandbox.Refused, match=r"workspace root is / \(the whole filesystem\)"):
        sandbox.run(["/bin/sh", "-c", "touch /ran"], "/", tree.settings())
    tool = ShellTool()
    events = []
    with pytest.raises(ToolError, match="Shell refused: the workspace root is /"):
        tool.run(tool.load({"command": "echo hi"}), tree.context(events=events, root="/"))
    assert events == []  # nothing started, no terminal reported
    for root in ("/proc", "/dev/shm", "/sys/fs"):
        with pytest.raises(sandbox.Refused):
            sandbox.check_root(root)


def test_root_at_home_masks_the_host_sockets_in_it(tree):
    place = tree.path("home", ".docker", "run", "docker.sock")  # root-equivalent on a host
    os.makedirs(os.path.dirname(place))
    server = UnixServer(place)
    try:
        result, out = run(tree, exchange(place), root=tree.home)
        assert result.exit_code != 0 and "EXCHANGED" not in out
        assert server.accepted == []
    finally:
        server.close()


def test_shared_scratch_and_runtime_roots_are_refused():
    for root in ("/tmp", "/var/tmp", "/run", "/run/user/1000"):
        with pytest.raises(sandbox.Refused, match="open a project directory"):
            sandbox.check_root(root)
    sandbox.check_root("/tmp/project")  # a directory inside /tmp is an ordinary workspace


def test_credentials_inside_a_toolchain_are_masked(tree):
    """The one list (core.sensitive) applies inside read-only trees too: here ~/.config is
    configured as a toolchain; its gh token and auth.json stay hidden, the rest is read."""
    tree.write("home/.config/gh/hosts.yml", SECRET)
    tree.write("home/.config/tool/auth.json", SECRET)
    tree.write("home/.config/editor/settings.json", "editor settings\n")
    settings = tree.settings(sandbox={"toolchains": [".config"]})
    _, out = run(tree, "cat ~/.config/gh/hosts.yml ~/.config/tool/auth.json "
                       "~/.config/editor/settings.json", settings)
    assert "editor settings" in out and SECRET not in out


def test_odd_byte_names_neither_break_nor_escape_the_sandbox(tree):
    """A host socket with a non-UTF-8 name inside a toolchain is masked like any other,
    and a workspace whose name is not UTF-8 still runs commands."""
    place = tree.path("home", ".local", "share", os.fsdecode(b"app\xff"), "run.sock")
    os.makedirs(os.path.dirname(place))
    server = UnixServer(place)
    root = tree.path(os.fsdecode(b"caf\xe9"))
    os.mkdir(root)
    try:
        result, out = run(tree, exchange(place) + "; pwd; echo hi > made", root=root)
        assert "EXCHANGED" not in out and server.accepted == []
        assert os.path.exists(os.path.join(root, "made"))
    finally:
        server.close()
