"""ACP v2: schemas, routes, handlers, the client proxy and the one event translation."""
