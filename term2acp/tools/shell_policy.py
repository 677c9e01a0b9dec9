"""What a ``shell`` call needs before it runs: the network on request, and ask mode.

Every command runs in the sandbox; what may differ is its network. Without one it runs in
a network namespace of its own (the session's loopback at most). ``network: true`` asks for
the host network, with the sandbox otherwise unchanged (writes confined to the workspace,
secrets masked):

* ``[shell] network = true`` (off by default) gives every command the network: nobody is
  asked;
* ``auto`` mode: a command runs at once when the session was granted the network; any
  other asks (``core.approvals.NETWORK``: allow once, for every command of the session, or
  reject; each says it is the host's whole network). There is no grant for commands that
  start with given words: ``git clone --upload-pack=...``, git's config and aliases, npm
  scripts and ``pip install .`` run any program with the network a prefix would grant;
* ``ask`` mode asks for every command: a network command with the same question, every
  time (grants are not consulted); any other (``core.approvals.COMMAND``: allow once,
  allow commands that start with ``<prefix>`` for the session, or reject) unless such a
  grant covers it;
* ``read-only`` mode refuses every command before this is consulted (``turns/modes.py``).

The ask-mode prefix choice is offered only for one simple command (``core/commandline.py``),
so a grant never covers more than the user saw.
"""

import re

from term2acp.core import commandline
from term2acp.core.approvals import COMMAND, NETWORK, ApprovalRequest
from term2acp.tools.base import Plan

ASK = "ask"  # the session mode that asks for every command (turns/modes.py)
# What a command prints when it has no network (curl, wget, pip, npm, git, python, ...)
_OFFLINE = re.compile(r"(?i)could not resolve host|temporary failure in name resolution|"
                      r"name or service not known|network is unreachable|"
                      r"failed to establish a new connection|getaddrinfo|eai_again|"
                      r"unable to resolve host|could not resolve hostname")
NETWORK_HINT = ("This command had no network. If it needs the network (a download, a "
                "package install, git clone), run it again with network: true: the user is "
                "asked to allow it.")
NETWORK_DESCRIPTION = (
    "Run with the host's network (package installs, git clone, downloads). Asks the user "
    "unless the session already allows it; without it the command has no network.")


class ShellPlan(Plan):
    """A checked shell call: whether it gets the host network once it runs."""

    def __init__(self, request=None, network=False):
        super().__init__(request=request)
        self.network = network


def check(args, ctx):
    """The plan for one shell call (its ``request`` is what to ask, or None)."""
    command = args["command"]
    wants = bool(args.get("network")) and not ctx.settings.shell.network
    mode, access = ctx.mode, ctx.access
    if wants and (mode == ASK or not access.has_network()):
        title = f"Allow the host's network for: {_line(command)}"
        return ShellPlan(ApprovalRequest(NETWORK, title=title), network=True)
    words = commandline.words(command)
    prefix = commandline.prefix_of(command)
    if mode == ASK and not access.runs_unasked(words):
        return ShellPlan(ApprovalRequest(COMMAND, title=f"Run: {_line(command)}",
                                         prefix=prefix), network=wants)
    return ShellPlan(network=wants)


def _line(command):
    lines = command.strip().splitlines() or [""]
    first = lines[0][:200]
    return first + (" ..." if len(lines) > 1 or len(lines[0]) > 200 else "")



def with_network_hint(result, had_network):
    """``result`` of a failed command that looks like it wanted the network, with a hint
    for the model to ask for it (else unchanged)."""
    if had_network or not result.is_error or not _OFFLINE.search(result.text):
        return result
    result.text = f"{result.text}\n{NETWORK_HINT}"
    return result
