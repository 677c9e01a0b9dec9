"""Tools the model can call. Each tool is one module of one shape (see base.py)."""
