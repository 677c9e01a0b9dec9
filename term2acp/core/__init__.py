"""Shared vocabulary of the runtime: the packages here import nothing else of term2acp."""
