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
            # the file has the detail; editors that show stderr in the chat (agent-shell)
            # get warnings and errors only
            stderr.setLevel(logging.WARNING)


def protect_stdio():
    """Take stdin and stdout for the protocol; returns ``(in_fd, out_fd)``.

    stdout: a private duplicate for the writer, and fd 1 pointed at stderr, so a stray
    ``print``, a library banner or a child's output lands on stderr and can never corrupt
    the JSON-RPC stream.

    stdin: a private open file description (re-opened through ``/proc/self/fd/0`` where
    the kernel allows it), and fd 0 pointed at ``/dev/null``. No child process can read
    protocol bytes, and none can switch our pipe back to blocking mode: ``O_NONBLOCK``
    belongs to the open file description, which a child inheriting fd 0 would share.
    """
    sys.stdout.flush()
    out_fd = os.dup(1)  # non-inheritable by default
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        in_fd = os.open("/proc/self/fd/0", os.O_RDONLY | os.O_CLOEXEC)
        if os.path.isfile(f"/proc/self/fd/{in_fd}"):
            # A regular file: a new description would restart at offset 0.
            os.close(in_fd)
            raise OSError("regular file")
    except OSError:
        in_fd = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return in_fd, out_fd
