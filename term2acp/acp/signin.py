"""``authMethods`` of the initialize answer, in the negotiated version's shape.

Its own module, importing only :mod:`term2acp.auth`: ``initialize`` needs it, and pulling
in acp/handlers.py (commands, events, session options) on that path would delay the
answer and hold the hub.
"""

import os
import sys

from term2acp import auth


def auth_methods(catalog, terminal, version):
    """``terminal``: how the client runs the sign-in (``acp/connection.py:terminal_auth``)."""
    out = []
    for kind, method_id, name, description in auth.methods(catalog, terminal):
        if version == 1:
            item = {"id": method_id, "name": name, "description": description, "type": kind}
            if kind == "terminal":
                item["args"] = [auth.LOGIN_FLAG]
                if terminal == "meta":
                    item["_meta"] = {"terminal-auth": _login_command()}
        else:
            item = {"type": kind, "methodId": method_id, "name": name,
                    "description": description}
            if kind == "terminal":
                item["args"] = [auth.LOGIN_FLAG]
        out.append(item)
    return out


def _login_command():
    """The sign-in as a command line, for clients that read it from
    ``_meta["terminal-auth"]`` (they predate ``type: "terminal"``)."""
    launcher = os.path.realpath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if os.path.isfile(launcher) and not launcher.endswith(".py"):
        args = [launcher, auth.LOGIN_FLAG]  # bin/term2-acp or the console script
    else:
        args = ["-m", "term2acp", auth.LOGIN_FLAG]
    return {"command": sys.executable, "args": args, "label": "term2-acp --login"}
