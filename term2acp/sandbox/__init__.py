"""Running commands: bubblewrap sandboxing (``bwrap``) with a filesystem view (``view``),
resource limits (``cgroup``) and a network shared by one session's commands
(``loopback``) over cooperative processes (``process``, the only user of ``sh``).

Callers: ``probe()`` once at start-up (print ``availability.warning()`` on stderr when it
is not available), then per command ``run(argv, root, settings, on_output, timeout,
network=, loopback=, tty=)`` to completion, or ``start(...)`` for one that keeps running
(a ``Process``: ``write``, ``wait``, ``kill``); ``freeze(pids)`` stops command trees
until ``thaw`` (``freezer``).
"""

from term2acp.sandbox.bwrap import (Availability, SandboxUnavailable, alive, build_argv,
                                    probe, run, scrub_env, start, unavailable_message)
from term2acp.sandbox.cgroup import memory_mechanism
from term2acp.sandbox.freezer import Frozen, freeze
from term2acp.sandbox.loopback import Loopback, LoopbackError
from term2acp.sandbox.process import Exit, InputClosed, LaunchError, Process, ProcessTimeout
from term2acp.sandbox.view import Refused, check_root

__all__ = ["Availability", "Exit", "Frozen", "InputClosed", "LaunchError", "Loopback", "LoopbackError",
           "Process", "ProcessTimeout", "Refused", "SandboxUnavailable", "alive", "build_argv",
           "check_root", "freeze", "memory_mechanism", "probe", "run", "scrub_env", "start",
           "unavailable_message"]
