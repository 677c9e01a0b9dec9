"""term2acp: a coding agent served over the Agent Client Protocol, versions 1 and 2."""

__version__ = "0.1.0"
