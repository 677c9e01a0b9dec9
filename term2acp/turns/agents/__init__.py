"""Sub-agents: the ``agent`` tool (``tool.py``), its kinds and agent files (``kinds.py``),
the child session and turn (``child.py``) and the overlay copy (``overlay.py``)."""
