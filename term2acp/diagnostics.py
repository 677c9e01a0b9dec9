"""Logging to stderr (and optionally a file). stdout is the protocol and nothing else."""

import logging
import os
import sys


def configure(env=os.environ):
    level_name = (env.get("TERM2ACP_LOG_LEVEL") or "WARNING").upper()
    level = getattr(logging, level_name, None)
    if not isinstance(level, int):
        level = logging.WARNING
    root = logging.getLogger()
    root.setLevel(level)
    for handler in list(root.handlers):
        root.removeHandler(handler)
    fmt = logging.Formatter("term2-acp: %(levelname)s %(name)s: %(message)s")
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setFormatter(fmt)
    root.addHandler(stderr)
    path = env.get("TERM2ACP_LOG_FILE")
    if path:
        try:
            handler = logging.FileHandler(path, encoding="utf-8")
        except OSError as exc:
            root.warning("cannot open TERM2ACP_LOG_FILE %s: %s", path, exc)
        else:
            handler.setFormatter(logging.Formatter(
                "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"))
            root.addHandler(handler)


def protect_stdout():
    """Keep fd 1 for the protocol: return a private duplicate and point fd 1 at stderr.

    Afterwards a stray ``print``, a library banner or an inherited child's output lands
    on stderr and can never corrupt the JSON-RPC stream.
    """
    sys.stdout.flush()
    proto = os.dup(1)  # non-inheritable by default
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return proto
