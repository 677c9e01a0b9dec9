"""The ACP v1 face: schemas, route table, handlers, the v1 translation and the editor's
file access (``fs/*``). The runtime behind it is the one the v2 face uses."""
