"""Start a pytest-xdist worker under gevent's monkey patching, as ``python -m gevent.monkey``
does for the controller: everything is patched before pytest, execnet or the tests import
``threading``/``socket``.

The controller (term2acp.testing.plugin) points xdist's ``popen`` specs at this file when
it runs patched itself: ``popen//python=<python> <this file>``. execnet then starts
``<python> <this file> -u -c <bootstrap>`` and sends its gateway over stdin, which this
script runs as ``-c`` would, with one change: execnet's pipe I/O to the controller reads
and writes through gevent's cooperative file objects. Its receiver is a greenlet here
(``_thread`` is patched), and a plain blocking ``read`` would stall the hub, so the tests
running in the main greenlet.
"""

from gevent import monkey

monkey.patch_all()

import sys  # noqa: E402

_OPEN_IO = "io = init_popen_io(execmodel)"


def _cooperative_io(io):
    """execnet's ``Popen2IO`` over the controller's pipes, reading and writing through
    gevent's file objects (the pipe descriptors become non-blocking)."""
    from gevent.fileobject import FileObjectPosix

    reader = FileObjectPosix(io.infile.fileno(), "rb", closefd=False)
    writer = FileObjectPosix(io.outfile.fileno(), "wb", closefd=False)

    def write(data):
        writer.write(data)
        writer.flush()

    io._read = reader.read
    io._write = write
    return io


def main():
    source = eval(sys.stdin.readline())  # what execnet's -c bootstrap line would run
    if _OPEN_IO not in source:
        raise SystemExit("term2acp xdist worker: unknown execnet bootstrap "
                         f"(no {_OPEN_IO!r}); run without -n or update xdist_worker.py")
    source = source.replace(_OPEN_IO, "io = _cooperative_io(init_popen_io(execmodel))", 1)
    exec(source, globals())


if __name__ == "__main__":
    main()
