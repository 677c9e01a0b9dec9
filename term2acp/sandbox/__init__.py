"""Running commands: bubblewrap sandboxing (``bwrap``) over cooperative processes
(``process``, the only user of ``sh``).

Callers: ``probe()`` once at start-up (print ``availability.warning()`` on stderr when it
is not available), then ``run(argv, root, settings, on_output, timeout)`` per command.
"""

from term2acp.sandbox.bwrap import (Availability, SandboxUnavailable, build_argv, probe,
                                    run, scrub_env, unavailable_message)
from term2acp.sandbox.process import Exit, LaunchError, ProcessTimeout

__all__ = ["Availability", "Exit", "LaunchError", "ProcessTimeout", "SandboxUnavailable",
           "build_argv", "probe", "run", "scrub_env", "unavailable_message"]
