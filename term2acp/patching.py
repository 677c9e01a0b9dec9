"""gevent's monkey patching, done once and first by the launchers.

gevent announces patching to third-party plug-ins through entry points, which makes it
scan the metadata of every installed distribution several times (most of the agent's
start-up; bench/startup). term2acp uses no such plug-in, so for the duration of the patch the
announcement goes only to in-process subscribers (``gevent.events.notify``, gevent's
public event API). Everything else is gevent's ``patch_all`` as documented.
"""


def patch_all():
    import gevent.events
    from gevent import monkey

    if monkey.is_module_patched("socket"):
        return
    announce = gevent.events.notify_and_call_entry_points
    gevent.events.notify_and_call_entry_points = gevent.events.notify
    try:
        monkey.patch_all()
    finally:
        gevent.events.notify_and_call_entry_points = announce
