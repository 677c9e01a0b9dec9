"""ACP, two faces over one runtime: the v2 face (``v2/``) and the v1 face (``v1/``), each
with its route table, handlers and the one translation of runtime events into its
messages. ``connection.py`` negotiates the version at ``initialize`` and installs that
face; what both faces share sits here: ``schemas/``, ``methods.py``, ``client.py``,
``errors.py``, ``handlers.py`` (what both faces' handlers share) and ``signin.py``."""
