"""Newline-delimited JSON-RPC 2.0 over gevent. Knows nothing of ACP."""
