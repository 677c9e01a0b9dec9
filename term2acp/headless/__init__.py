"""The command line without an editor: ``term2acp exec`` (one prompt, the real agent served
in this process over a socket pair, driven as an ACP v2 client) and ``term2acp sessions``
(list, show, export, import, delete the stored sessions). Loaded only by those commands:
nothing here is on the editor's start-up path."""
