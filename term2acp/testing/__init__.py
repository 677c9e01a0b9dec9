"""Test kit: drive a real ``term2-acp`` over pipes, validate every message against the
ACP schema of the connection's version (v1 or v2), script the model. Used by the
project's own tests and by integrators."""

from term2acp.testing.harness import AgentProcess, ProtocolError  # noqa: F401
