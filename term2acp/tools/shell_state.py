"""A session's shell: the loopback its commands share (``sandbox/loopback.py``: a server
one call starts is reached by the next call) and its background processes
(``tools/processes.py``).

The session owns it: ``LiveSession`` makes one when it opens, the session manager closes
it when the session closes or goes dormant (the processes end, their exits reported, and
the loopback is released), and each tool call gets it as ``ctx.shell``. Making one costs
nothing: the sandbox is imported, and the loopback made, when a command first needs it.
A closed shell starts nothing more.
"""

from term2acp.tools.base import ToolError

KEEP_EXITED = 16  # exited processes kept per session until read (older ones are dropped)


class SessionShell:
    def __init__(self):
        self._loopback = None  # sandbox.Loopback, made on first use
        self.processes = {}  # process id -> processes.Background, in start order
        self.starting = 0  # slots admitted whose start has not returned yet
        self.closed = False
        self._count = 0
        self._holds, self._frozen = 0, None  # freeze(): how many holds, what they stopped

    @property
    def loopback(self):
        """The session's ``sandbox.Loopback`` (a closed one once the shell is closed)."""
        if self._loopback is None:
            from term2acp import sandbox  # with the first command: off the start-up path

            self._loopback = sandbox.Loopback()
            if self.closed:
                self._loopback.close()
        return self._loopback

    def live(self):
        return [p for p in self.processes.values() if p.running]

    def running(self):
        """How many background processes are running."""
        return len(self.live())

    def freeze(self):
        """Stop the background processes, whole trees, until the returned hold is thawed
        (``thaw()``, or leaving it as a context manager): nothing of the session writes
        meanwhile. Holds nest (/undo in read-only mode): the last thaw resumes them."""
        self._holds += 1
        if self._holds == 1:
            pids = [p.process.pid for p in self.live()]
            if pids:
                from term2acp import sandbox

                self._frozen = sandbox.freeze(pids)
        return _Hold(self)

    def _release(self):
        self._holds -= 1
        if self._holds == 0 and self._frozen is not None:
            self._frozen, frozen = None, self._frozen
            frozen.thaw()

    def admit(self, settings):
        """A new process id with its slot taken (``starting``, until the start returns:
        the calls of one round start side by side), or ToolError when the session is at
        its limit (or closed)."""
        if self.closed:
            raise ToolError("The session is closed; no process starts in it any more.")
        limit = settings.shell.max_processes
        live = self.live()
        if len(live) + self.starting >= limit:
            ids = ", ".join([p.process_id for p in live] + ["starting"] * self.starting)
            raise ToolError(f"{len(live) + self.starting} background processes are already "
                            "running in this "
                            f"session ({ids}), the limit ([shell] max_processes = {limit}). "
                            "End one with shell_kill first, or run the command in the "
                            "foreground.")
        exited = [p for p in self.processes.values() if not p.running]
        for old in exited[:max(0, len(exited) - KEEP_EXITED + 1)]:
            del self.processes[old.process_id]
        self._count += 1
        self.starting += 1
        return f"p{self._count}"

    def get(self, process_id):
        found = self.processes.get(process_id)
        if found is None:
            known = ", ".join(self.processes) or "none"
            raise ToolError(f"There is no background process {process_id!r} in this session "
                            f"(known: {known}). Start one with shell and background: true.")
        return found

    def close(self):
        """End the processes (their exits are reported) and release the loopback."""
        self.closed = True
        for process in list(self.processes.values()):
            process.kill()
        if self._loopback is not None:
            self._loopback.close()


class _Hold:
    def __init__(self, shell):
        self.shell = shell

    def thaw(self):
        shell, self.shell = self.shell, None
        if shell is not None:
            shell._release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.thaw()
