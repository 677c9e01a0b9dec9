"""``authMethods`` of the initialize answer, in the negotiated version's shape.

Its own module, importing only :mod:`term2acp.auth`: ``initialize`` needs it, and pulling
in acp/controls.py (commands, events, session options) on that path cost the answer (and
the hub) tens of milliseconds (issue 16).
"""

from term2acp import auth


def auth_methods(catalog, terminal, version):
    out = []
    for kind, method_id, name, description in auth.methods(catalog, terminal):
        if version == 1:
            item = {"id": method_id, "name": name, "description": description}
            if kind == "terminal":
                item.update(type="terminal", args=[auth.LOGIN_FLAG])
        else:
            item = {"type": kind, "methodId": method_id, "name": name,
                    "description": description}
            if kind == "terminal":
                item["args"] = [auth.LOGIN_FLAG]
        out.append(item)
    return out
