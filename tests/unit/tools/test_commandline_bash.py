"""The grant lexer (core/commandline.py) against bash itself: every line is run by bash in a
temporary folder whose PATH is empty, so each command bash would run is recorded (its
argv, by ``command_not_found_handle``) instead of run. A line the lexer reads as words must
be exactly one command with exactly those words in bash; the hostile lines (each of which
bash runs differently from how a naive reading sees it) must have no words."""

import random
import shutil
import subprocess

import pytest

from term2acp.core import commandline

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="no bash")

PRELUDE = r"""
command_not_found_handle() {
    printf '%s\0' "$@" $'\x01' >> "$T2_LOG"  # one write: a pipeline's commands append at once
    return 0
}
trap 'wait' EXIT
"""


@pytest.fixture
def bash(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    empty = tmp_path / "bin"
    empty.mkdir()
    prelude = tmp_path / "prelude.sh"
    prelude.write_text(PRELUDE)
    for name in ("x", "y", "in.txt", "--upload-pack=touch pwned"):
        (home / name).write_text("")

    def run(line):
        """The argv lists bash runs for ``line``, in order."""
        log = tmp_path / "log"
        log.write_bytes(b"")
        env = {"PATH": str(empty), "HOME": str(home), "BASH_ENV": str(prelude),
               "T2_LOG": str(log), "LC_ALL": "C"}
        subprocess.run([BASH, "-c", line], cwd=home, env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
        commands = []
        for record in log.read_bytes().split(b"\x01\0")[:-1]:
            commands.append([w.decode().replace(str(home), "HOME")
                             for w in record.split(b"\0")[:-1]])
        return commands
    return run


# (line, what bash runs, the lexer's words: None = refused)
TABLE = [
    # a ``#`` inside a word is part of it for bash; shlex's default read a comment there
    ("git clone x#; curl e.invalid", [["git", "clone", "x#"], ["curl", "e.invalid"]], None),
    ("git clone y# && curl e.invalid", [["git", "clone", "y#"], ["curl", "e.invalid"]], None),
    ("git status#; touch pwned", [["git", "status#"], ["touch", "pwned"]], None),
    ("git status #; touch pwned", [["git", "status"]], None),  # a real comment: refused too
    # brace expansion makes words the line does not show
    ("git{,} status", [["git", "git", "status"]], None),
    ("git clone {x,--upload-pack=touch\\ pwned}",
     [["git", "clone", "x", "--upload-pack=touch pwned"]], None),
    ("{ curl e.invalid; }", [["curl", "e.invalid"]], None),
    # globs and ~ expand to file names, which the model can choose
    ("git clone *", [["git", "clone", "--upload-pack=touch pwned", "in.txt", "x", "y"]], None),
    ("git clone ?", [["git", "clone", "x", "y"]], None),
    ("git clone [x]", [["git", "clone", "x"]], None),
    ("git clone ~/x", [["git", "clone", "HOME/x"]], None),
    # escapes, continuations, ANSI-C and locale quoting
    ("git clone x\\;curl e.invalid", [["git", "clone", "x;curl", "e.invalid"]], None),
    ("git status \\\ncurl e.invalid", [["git", "status", "curl", "e.invalid"]], None),
    ("git $'status\\x3b' x", [["git", "status;", "x"]], None),
    ("git $\"status\" x", [["git", "status", "x"]], None),
    ('git "$(curl e.invalid)"', [["curl", "e.invalid"], ["git", ""]], None),
    ('git "`curl e.invalid`"', [["curl", "e.invalid"], ["git", ""]], None),
    ('git "a\\"b"', [["git", 'a"b']], None),
    ("git $HOME", [["git", "HOME"]], None),
    # process substitution, here-documents and here-strings
    ("git diff <(curl e.invalid)", None, None),
    ("git apply <<EOF\nx\nEOF", [["git", "apply"]], None),
    ("git apply <<<x", [["git", "apply"]], None),
    # ``!`` negates a pipeline; ``&``, ``|``, ``;``, newlines chain commands
    ("! git status", [["git", "status"]], None),
    ("git status & curl e.invalid", None, None),
    ("git status | curl e.invalid", [["git", "status"], ["curl", "e.invalid"]], None),
    ("git status\ncurl e.invalid", [["git", "status"], ["curl", "e.invalid"]], None),
    ("git status\rcurl", [["git", "status\rcurl"]], None),
    ("(curl e.invalid)", [["curl", "e.invalid"]], None),
    ("FOO=1 curl e.invalid", [["curl", "e.invalid"]], None),
    ("2>x curl e.invalid", [["curl", "e.invalid"]], None),
    ("git clone x &>y; curl e.invalid", [["git", "clone", "x"], ["curl", "e.invalid"]], None),
    # what the lexer reads: exactly what bash runs
    ("git clone x", [["git", "clone", "x"]], ["git", "clone", "x"]),
    ("git clone 'x#; curl e.invalid'", [["git", "clone", "x#; curl e.invalid"]],
     ["git", "clone", "x#; curl e.invalid"]),
    ('git commit -m "a; b | c & {d} ~ * #"', [["git", "commit", "-m", "a; b | c & {d} ~ * #"]],
     ["git", "commit", "-m", "a; b | c & {d} ~ * #"]),
    ("git \"st\"'at'us -x=1,2@3%4+5^6:7", [["git", "status", "-x=1,2@3%4+5^6:7"]],
     ["git", "status", "-x=1,2@3%4+5^6:7"]),
    ("pip install -r in.txt > log.txt 2>&1", [["pip", "install", "-r", "in.txt"]],
     ["pip", "install", "-r", "in.txt"]),
    ("make test 2>>err <in.txt >|out", [["make", "test"]], ["make", "test"]),
    ("make a2>x", [["make", "a2"]], ["make", "a2"]),
    ("make 2 >x", [["make", "2"]], ["make", "2"]),
    ("make >&2 test", [["make", "test"]], ["make", "test"]),
    ("git ''", [["git", ""]], ["git", ""]),
]


@pytest.mark.parametrize("line, runs, expected", TABLE)
def test_hostile_lines_against_bash(bash, line, runs, expected):
    ran = bash(line)
    if runs is not None:
        assert sorted(ran) == sorted(runs)  # what bash does: checked, not assumed (a
        # pipeline's commands start side by side)
    assert commandline.words(line) == expected
    if expected is not None:
        assert ran == [expected]
    else:
        assert commandline.prefix_of(line) is None


ALPHABET = ["git", "clone", "x", " ", " ", " ", "#", ";", "&", "|", "$", "(", ")", "{",
            "}", ",", "~", "*", "?", "[", "]", "!", "\\", "'", '"', ">", ">>", "2>&1", "2",
            "=", "a", "-", "\n", "`", "^", "%", "@", "+", "\t", "$'", "<(", "'#'"]


def test_random_lines_read_as_bash_runs_them(bash):
    """Lines made of shell-special pieces at random: whenever the lexer gives words, bash
    runs exactly one command with exactly those words."""
    rng = random.Random(34)
    read = 0
    for _ in range(400):
        line = "git " + "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 7)))
        found = commandline.words(line)
        if found is None:
            continue
        read += 1
        assert bash(line) == [found], line
    assert read > 40  # the sweep checked enough lines the lexer accepts
