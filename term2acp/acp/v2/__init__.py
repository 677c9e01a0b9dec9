"""The ACP v2 face: route table (``routes.py``), session handlers (``handlers.py``), the one
translation of runtime events into ``session/update``s (``translate.py``) and the approval
bridge (``permissions.py``). The v1 face (``acp/v1/``) says the same in other shapes and
reuses these where the shapes agree; v2 never imports v1."""
