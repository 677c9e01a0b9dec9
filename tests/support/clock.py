"""The suite's wall-clock bounds, named once.

A few tests check that something ends promptly (a cancel kills a process group, a hostile
pattern cannot stall a search). Each states the bound it expects on an idle machine, and
:func:`within` widens it by ``TERM2ACP_TEST_SLACK`` (default 1; 3 under ``CI=true``): a
busy machine slows everything alike, and such a test checks "promptly, not after the
timeout", not a speed. Speeds are measured in ``bench/``.
"""

import os


def _slack():
    value = os.environ.get("TERM2ACP_TEST_SLACK", "").strip()
    if value:
        return max(1.0, float(value))
    ci = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
    return 3.0 if ci else 1.0


SLACK = _slack()


def within(seconds):
    """``seconds`` on an idle machine, widened by the slack."""
    return seconds * SLACK
