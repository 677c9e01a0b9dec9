"""What the client advertised at initialize, read once into ClientCapabilities
(acp/capabilities.py), in each version's shape."""

from term2acp.acp.capabilities import ClientCapabilities

V1 = {"fs": {"readTextFile": True, "writeTextFile": False}, "terminal": True,
      "auth": {"terminal": True}, "session": {"compaction": {}},
      "_meta": {"terminal_output": True}, "elicitation": {"form": {}}}
V2 = {"auth": {"terminal": {}}, "session": {"compaction": {}}, "elicitation": {"url": {}},
      "fs": {"readTextFile": True}, "_meta": {"terminal_output": True}}


def test_v1_capabilities():
    caps = ClientCapabilities(V1, 1)
    assert (caps.files.read, caps.files.write) == (True, False)
    assert caps.terminal_auth == "auth" and caps.compaction and caps.terminal_meta
    assert caps.elicitation.form and not caps.elicitation.url


def test_v2_capabilities_have_no_v1_only_fields():
    caps = ClientCapabilities(V2, 2)
    assert (caps.files.read, caps.files.write) == (False, False)  # no fs/* in v2
    assert not caps.terminal_meta  # a v1 _meta convention (Zed)
    assert caps.terminal_auth == "auth" and caps.compaction
    assert caps.elicitation.url and not caps.elicitation.form


def test_nothing_advertised():
    for version in (1, 2):
        caps = ClientCapabilities(None, version)
        assert caps.terminal_auth is None and not caps.compaction and not caps.terminal_meta
        assert not caps.files.read and not caps.elicitation.form
