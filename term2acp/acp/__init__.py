"""ACP v2: schemas, routes, handlers, the client proxy and the one event translation."""

# First thing in the package: import marshmallow the cheap way (see schemas/lazyre.py).
import term2acp.acp.schemas  # noqa: F401
