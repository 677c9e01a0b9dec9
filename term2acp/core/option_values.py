"""The enumerated settings every layer shares: reasoning efforts and session modes.

One place, so that the config file's schema (``term2acp/config.py``), the command line,
the session config options and the turn's policy accept exactly the same values.
"""

EFFORTS = ("default", "none", "minimal", "low", "medium", "high", "xhigh")
MODE_IDS = ("read-only", "plan", "ask", "auto")  # what each allows: turns/modes.py
DEFAULT_MODE = "auto"
