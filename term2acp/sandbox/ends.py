"""The descriptors of one launch (``process.py``): what the child gets as its stdin and its
stdout/stderr, and what the agent keeps (``output`` to read, ``input`` to write, or None).

stdin is ``/dev/null`` (``NULL``), a pipe the agent writes to (``PIPE``), or a
pseudo-terminal (``TTY``) that is also the command's output and its controlling terminal.
Its output is a pipe the agent reads (the output pump), or a descriptor the caller gave
(``stdout``), which the caller reads itself and closes after the start.
"""

import fcntl
import os
import struct
import termios

import gevent.os

NULL, PIPE, TTY = "null", "pipe", "tty"  # what a command's stdin is
TTY_SIZE = (40, 120)  # rows, columns of a command's pseudo-terminal
_PIPE_SIZE = 1024 * 1024
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


class Ends:
    """The descriptors of one launch: what the child gets (``child_in``, ``child_out``)
    and what the agent keeps (``output`` to read, ``input`` to write, or None)."""

    def __init__(self, stdin, stdout=None):
        self.input = self.output = None
        self.tty = stdin == TTY
        given = set()
        if self.tty:
            master, slave = os.openpty()
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", *TTY_SIZE, 0, 0))
            self.output = self.input = master
            self.child_in = self.child_out = slave
        else:
            if stdout is None:
                self.output, self.child_out = os.pipe()
                _grow_pipe(self.child_out)
            else:  # the caller's: it reads it, and closes it after the start
                self.child_out = stdout
                given.add(stdout)
            if stdin == PIPE:
                self.child_in, self.input = os.pipe()
            else:
                self.child_in = os.open(os.devnull, os.O_RDONLY)
        for fd in {self.output, self.input} - {None}:
            gevent.os.make_nonblocking(fd)
        self._child = {self.child_in, self.child_out} - given
        self._ours = {self.output, self.input} - {None}

    def close_child(self):
        for fd in self._child:
            os.close(fd)
        self._child = set()

    def close_input(self):
        """Close the input pipe (the command reads the end of its input)."""
        fd = self.input
        if fd is not None and not self.tty:
            self.input = None
            self._ours.discard(fd)
            os.close(fd)

    def close_all(self):
        self.close_child()
        for fd in self._ours:
            os.close(fd)
        self._ours = set()
        self.input = None


def _grow_pipe(fd):
    try:
        fcntl.fcntl(fd, _F_SETPIPE_SZ, _PIPE_SIZE)
    except OSError:
        pass
