"""Running commands: bubblewrap sandboxing (``bwrap``) with a filesystem view (``view``)
and resource limits (``cgroup``) over cooperative processes (``process``, the only user
of ``sh``).

Callers: ``probe()`` once at start-up (print ``availability.warning()`` on stderr when it
is not available), then ``run(argv, root, settings, on_output, timeout)`` per command.
"""

from term2acp.sandbox.bwrap import (Availability, SandboxUnavailable, build_argv, probe,
                                    run, scrub_env, unavailable_message)
from term2acp.sandbox.cgroup import memory_mechanism
from term2acp.sandbox.process import Exit, LaunchError, ProcessTimeout
from term2acp.sandbox.view import Refused, check_root

__all__ = ["Availability", "Exit", "LaunchError", "ProcessTimeout", "Refused",
           "SandboxUnavailable", "build_argv", "check_root", "memory_mechanism", "probe", "run",
           "scrub_env", "unavailable_message"]
