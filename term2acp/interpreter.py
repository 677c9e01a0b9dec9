"""Which Python runs a launcher of the checkout (``bin/term2-acp``, ``bin/term2-acp-chat``).

Editors spawn ``bin/term2-acp`` by path with their own PATH, where ``python3`` is usually
the system's, without the agent's dependencies, while the quick start installed them into
the checkout's virtualenv. A launcher that cannot import its dependencies re-executes
itself with that virtualenv's Python (``.venv`` or ``venv`` beside ``bin/``), so the
snippets work as pasted; without one it exits 1 saying what to do. Standard library only:
it runs before anything else could be imported.
"""

import os
import sys

VENVS = (".venv", "venv")


def candidates(root):
    """The checkout's virtualenv Pythons, except the one running now (no exec loop)."""
    here = os.path.realpath(sys.prefix)
    for name in VENVS:
        venv = os.path.join(root, name)
        python = os.path.join(venv, "bin", "python")
        if os.access(python, os.X_OK) and os.path.realpath(venv) != here:
            yield python


def reexec(root, script, missing, command):
    """Run ``script`` again under the checkout's virtualenv, or exit 1 explaining why not.

    ``missing`` is the ModuleNotFoundError that brought us here.
    """
    for python in candidates(root):
        os.execv(python, [python, script, *sys.argv[1:]])
    sys.stderr.write(
        f"{command}: {sys.executable} lacks the agent's dependencies ({missing}).\n"
        f"Install term2acp into a virtualenv beside the checkout ({root}/.venv: python3 -m "
        f"venv .venv && .venv/bin/pip install -e .), which this script then uses, or give "
        f"your editor the {command} command of the Python you installed it into.\n")
    sys.exit(1)
