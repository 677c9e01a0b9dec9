"""term2acp: a coding agent served over the Agent Client Protocol, version 2."""

__version__ = "0.1.0"
