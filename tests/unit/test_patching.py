"""term2acp/patching.py: gevent's patch_all, without the plug-in scan.

Each check runs in a fresh interpreter (the test process itself is patched by
``python -m gevent.monkey`` already)."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHECK = r"""
import json, sys
sys.path.insert(0, ROOT)
import gevent.events
announce = gevent.events.notify_and_call_entry_points
from term2acp.patching import patch_all
patch_all()
patch_all()  # once only
out = {"scanned_plugins": "importlib.metadata" in sys.modules or "pkg_resources" in sys.modules,
       "announce_restored": gevent.events.notify_and_call_entry_points is announce}
import ssl, subprocess, socket, threading
import gevent, gevent.ssl, gevent.subprocess, gevent.socket
from gevent import monkey
out["patched"] = [name for name in ("socket", "ssl", "subprocess", "threading", "select")
                  if monkey.is_module_patched(name)]
out["same_classes"] = (ssl.SSLContext is gevent.ssl.SSLContext
                       and subprocess.Popen is gevent.subprocess.Popen
                       and socket.socket is gevent.socket.socket)
results = []
workers = [threading.Thread(target=results.append, args=(n,)) for n in range(3)]
for worker in workers:
    worker.start()
for worker in workers:
    worker.join(5)
out["threads"] = sorted(results)
out["native_thread"] = gevent.get_hub().threadpool.spawn(lambda: 6 * 7).get(timeout=5)
out["echo"] = subprocess.run(["echo", "hi"], capture_output=True, text=True).stdout
print(json.dumps(out))
"""


def _run():
    code = CHECK.replace("ROOT", repr(ROOT))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONWARNINGS": "error"})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_patch_all_patches_everything_once_without_scanning_plugins():
    out = _run()
    assert not out["scanned_plugins"] and out["announce_restored"]
    assert out["patched"] == ["socket", "ssl", "subprocess", "threading", "select"]
    assert out["same_classes"]
    assert out["threads"] == [0, 1, 2] and out["native_thread"] == 42
    assert out["echo"] == "hi\n"
