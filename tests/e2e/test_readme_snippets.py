"""Every editor snippet of README.rst starts the agent as pasted, from a plain PATH.

The situation of a user who followed the quick start: the dependencies live in the
checkout's ``.venv``, and the editor's PATH finds a ``python3`` without them. The test
builds it: a copy of the checkout (``bin/`` and ``term2acp/``) whose ``.venv`` has the
dependencies, and a bare virtualenv's ``python3`` first on PATH. Each snippet's command is
spawned exactly as the README writes it (``/path/to/term2acp`` replaced by the copy), with
the snippet's arguments and environment, and must answer ``initialize``.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLACEHOLDER = "/path/to/term2acp"
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": 1, "clientInfo": {"name": "snippet", "version": "1"},
    "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}}}}


def literal_blocks(section):
    """The literal blocks (after ``::``) of a README section, dedented."""
    blocks = []
    for match in re.finditer(r"::\n\n((?:(?:    .*)?\n)+)", section):
        lines = [line[4:] for line in match.group(1).splitlines()]
        blocks.append("\n".join(lines).strip("\n"))
    return blocks


def editor_snippets():
    """``(name, argv, env)`` of each snippet naming the launcher, and the shell checks."""
    with open(os.path.join(ROOT, "README.rst"), encoding="utf-8") as fh:
        text = fh.read()
    section = text.split("\nEditors\n=======\n", 1)[1].split("\nModel providers\n====", 1)[0]
    spawned, shell = [], []
    for block in literal_blocks(section):
        if PLACEHOLDER not in block:
            continue
        if block.startswith("{"):
            (name, server), = json.loads(block)["agent_servers"].items()
            label = "zed" if server.get("type") == "custom" else "jetbrains"
            spawned.append((label, [server["command"], *server["args"]], server.get("env", {})))
        elif "codecompanion" in block:
            command = re.search(r'commands = \{ default = \{ "([^"]+)" \} \}', block).group(1)
            spawned.append(("codecompanion", [command], {}))
        elif "agent-shell" in block:
            command = re.search(r':command "([^"]+)"', block).group(1)
            assert ":command-params '()" in block
            spawned.append(("agent-shell", [command], {}))
        else:
            shell.append(block)
    return spawned, shell


@pytest.fixture
def plain_path(tmp_path):
    """``(checkout, env)``: a checkout copy whose .venv has the dependencies, and an
    environment whose PATH leads to a python3 without them."""
    checkout = tmp_path / "term2acp"
    ignore = shutil.ignore_patterns("__pycache__")
    for part in ("bin", "term2acp"):
        shutil.copytree(os.path.join(ROOT, part), checkout / part, ignore=ignore)
    if sys.prefix != sys.base_prefix:  # the suite runs in a virtualenv: that is the .venv
        os.symlink(sys.prefix, checkout / ".venv")
    else:
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                        str(checkout / ".venv")], check=True, timeout=60)
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True,
                   timeout=60)
    python3 = bare / "bin" / "python3"
    probe = subprocess.run([str(python3), "-c", "import gevent"], capture_output=True, timeout=30)
    assert probe.returncode != 0, "the bare python3 must lack the dependencies"
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": f"{bare / 'bin'}:/usr/bin:/bin", "HOME": str(home),
           "TERM2ACP_HOME": str(home / "data"), "XDG_CONFIG_HOME": str(home / "config")}
    return str(checkout), env


def test_readme_snippets_are_found():
    spawned, shell = editor_snippets()
    assert sorted(name for name, _, _ in spawned) == [
        "agent-shell", "codecompanion", "jetbrains", "zed"], (
        "a new editor snippet in README.rst's Editors section: teach editor_snippets() how to "
        "read its command")
    assert len(shell) == 2


def test_readme_editor_snippets_answer_initialize_from_a_plain_path(plain_path):
    checkout, env = plain_path
    spawned, _ = editor_snippets()
    agents = []
    for name, argv, extra in spawned:
        argv = [part.replace(PLACEHOLDER, checkout) for part in argv]
        assert argv[0] == f"{checkout}/bin/term2-acp", name
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=dict(env, **extra), cwd=checkout)
        agents.append((name, proc))
    for name, proc in agents:
        out, err = proc.communicate(json.dumps(INITIALIZE).encode() + b"\n", timeout=60)
        first = out.decode().splitlines()[0] if out else ""
        assert first, f"{name}: no answer (exit {proc.returncode}): {err.decode()[-2000:]}"
        answer = json.loads(first)
        assert answer["id"] == 0 and answer["result"]["protocolVersion"] == 1, (name, answer)
        assert proc.returncode == 0, (name, err.decode()[-2000:])


def test_readme_setup_check_prints_three_lines_from_a_plain_path(plain_path, tmp_path):
    checkout, env = plain_path
    _, shell = editor_snippets()
    check = next(block for block in shell if block.startswith("printf"))
    project = tmp_path / "project"
    project.mkdir()
    run = subprocess.run(["/bin/sh", "-c", check.replace(PLACEHOLDER, checkout)], cwd=project,
                         env=dict(env, PWD=str(project)), capture_output=True, timeout=60)
    lines = [json.loads(line) for line in run.stdout.decode().splitlines()]
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    assert [line.get("id") for line in lines[:2]] == [0, 1]
    assert lines[0]["result"]["protocolVersion"] == 1
    assert lines[1]["result"]["sessionId"]
    for line in lines[2:]:  # the commands update, when it was sent before stdin's end
        assert line["params"]["update"]["sessionUpdate"] == "available_commands_update"


def test_readme_plain_path_without_a_venv_says_what_to_do(plain_path):
    checkout, env = plain_path
    os.unlink(os.path.join(checkout, ".venv")) if os.path.islink(
        os.path.join(checkout, ".venv")) else shutil.rmtree(os.path.join(checkout, ".venv"))
    run = subprocess.run([f"{checkout}/bin/term2-acp"], input=b"", env=env, capture_output=True,
                         timeout=60)
    assert (run.returncode, run.stdout) == (1, b"")
    assert "lacks the agent's dependencies (No module named 'gevent')" in run.stderr.decode()
    assert f"{checkout}/.venv" in run.stderr.decode()


def test_readme_whole_turn_check_prints_the_answer_from_a_plain_path(plain_path, tmp_path):
    checkout, env = plain_path
    _, shell = editor_snippets()
    check = next(block for block in shell if block.startswith("python3 -"))
    script = tmp_path / "turns.json"
    script.write_text(json.dumps({"turns": [[{"text": "Hello from the model."}]]}))
    run = subprocess.run(["/bin/sh", "-c", check.replace(PLACEHOLDER, checkout)], cwd=tmp_path,
                         env=dict(env, TERM2ACP_PROVIDER="scripted", TERM2ACP_SCRIPT=str(script)),
                         capture_output=True, timeout=60)
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    out = run.stdout.decode()
    assert out.startswith("Hello from the model.\n") and "'stopReason': 'end_turn'" in out, out
