"""What the client advertised at ``initialize``: read once into a :class:`ClientCapabilities`
that the negotiated face is built with (``acp/connection.py``)."""

from term2acp.acp.elicitation import ElicitationSupport


class ClientFiles:
    """What a v1 client advertised under ``clientCapabilities.fs``."""

    __slots__ = ("read", "write")

    def __init__(self, capabilities):
        fs = (capabilities or {}).get("fs")
        fs = fs if isinstance(fs, dict) else {}
        self.read = fs.get("readTextFile") is True
        self.write = fs.get("writeTextFile") is True


def advertises_compaction(capabilities):
    """``session.compaction`` is an object in the client's capabilities (v1's
    ``ClientSessionCapabilities.compaction``; v2 has no field yet, so the same shape under
    ``capabilities.session`` is honoured there)."""
    session = (capabilities or {}).get("session") if isinstance(capabilities, dict) else None
    return isinstance(session, dict) and isinstance(session.get("compaction"), dict)


def terminal_output_meta(capabilities):
    """v1 ``_meta.terminal_output: true``: the client (Zed) shows a tool call's command in
    its own terminal fed through ``_meta`` (``acp/v1/terminal_meta.py``)."""
    meta = (capabilities or {}).get("_meta") if isinstance(capabilities, dict) else None
    return isinstance(meta, dict) and meta.get("terminal_output") is True


def terminal_auth(capabilities, version):
    """How the client can run ``term2-acp --login`` itself: ``"auth"`` (v1
    ``auth.terminal: true``, v2 ``auth.terminal: {}``), ``"meta"`` (only
    ``_meta["terminal-auth"]: true``, which the ACP registry's validator and clients older
    than ``auth.terminal`` send: they read the command line from the method's ``_meta``),
    or None."""
    if not isinstance(capabilities, dict):
        return None
    auth = capabilities.get("auth")
    terminal = auth.get("terminal") if isinstance(auth, dict) else None
    if terminal is True if version == 1 else isinstance(terminal, dict):
        return "auth"
    meta = capabilities.get("_meta")
    if isinstance(meta, dict) and meta.get("terminal-auth") is True:
        return "meta"
    return None


class ClientCapabilities:
    """The client's capabilities as the agent uses them, for either version.

    ``files``: v1's ``fs/*`` (v2 has none); ``terminal_auth``: ``"auth"``, ``"meta"`` or
    None; ``compaction``: ``compaction_update`` allowed (else agent messages);
    ``terminal_meta``: v1 ``_meta.terminal_output`` (Zed's terminal); ``elicitation``:
    the ``elicitation/create`` modes."""

    __slots__ = ("files", "terminal_auth", "compaction", "terminal_meta", "elicitation")

    def __init__(self, advertised, version):
        self.files = ClientFiles(advertised if version == 1 else None)
        self.terminal_auth = terminal_auth(advertised, version)
        self.compaction = advertises_compaction(advertised)
        self.terminal_meta = version == 1 and terminal_output_meta(advertised)
        self.elicitation = ElicitationSupport(advertised)
