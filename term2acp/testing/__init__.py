"""Test kit: drive a real ``term2-acp`` over pipes, validate every message against the
ACP v2 schema, script the model. Used by the project's own tests and by integrators."""

from term2acp.testing.harness import AgentProcess, ProtocolError  # noqa: F401
