"""ACP, two faces over one runtime: the v2 face (``schemas/``, ``sessions.py``,
``translate.py``, ``permissions.py``) and the v1 face (``v1/``), each with its schemas,
route table and the one translation of runtime events into its messages; ``agent.py``
picks one per connection at ``initialize``; ``client.py`` and ``errors.py`` are shared."""

# First thing in the package: import marshmallow the cheap way (see schemas/lazyre.py).
import term2acp.acp.schemas  # noqa: F401
