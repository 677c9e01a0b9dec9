"""Imports off the hub: one at a time, in a thread of gevent's pool.

Start-up leaves what only prompts need (the tools, the sandbox, web_fetch's converter),
the command plug-ins' scan and an MCP stdio server's process module to a thread, so
``initialize`` and ``session/new`` do not wait for them. Under gevent's monkey-patching
the interpreter's per-module import locks are not the ones its deadlock detection was
written for, so two threads importing overlapping modules at once (the preload's
``term2acp.sandbox.bwrap`` and a stdio server's ``term2acp.sandbox.process``, say) could
each wait on a module the other holds. :func:`in_thread` runs such work one piece at a
time: a native lock (never taken on the hub) is held around it in the thread, and the
calling greenlet waits cooperatively.
"""

import gevent
from gevent import monkey

_one_at_a_time = monkey.get_original("_thread", "allocate_lock")()


def in_thread(work, *args):
    """``work(*args)`` in a thread of gevent's pool, after the imports queued before it;
    returns its result or raises its exception."""
    return gevent.get_hub().threadpool.apply(_alone, (work, args))


def _alone(work, args):
    with _one_at_a_time:
        return work(*args)
