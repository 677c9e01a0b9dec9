"""term2acp/patching.py: ssl and subprocess are patched as they are first imported.

Each check runs in a fresh interpreter (the test process itself is patched by
``python -m gevent.monkey`` already)."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHECK = r"""
import importlib.machinery, json, sys
sys.path.insert(0, ROOT)
from term2acp.patching import patch_all
patch_all()
out = {"loaded_before": [m for m in ("ssl", "subprocess") if m in sys.modules]}
from gevent import monkey
IMPORTS
import ssl, subprocess
import gevent.ssl, gevent.subprocess
out["ssl_patched"] = monkey.is_module_patched("ssl") and ssl.SSLContext is gevent.ssl.SSLContext
out["ssl_socket"] = ssl.SSLSocket is gevent.ssl.SSLSocket
out["popen"] = subprocess.Popen is gevent.subprocess.Popen
out["one_module"] = sys.modules["ssl"] is ssl and sys.modules["subprocess"] is subprocess
out["spec"] = [type(m.__spec__.loader).__name__ for m in (ssl, subprocess)]
out["finder_left"] = [type(f).__name__ for f in sys.meta_path if "Patch" in type(f).__name__]
import http.client
out["http_client"] = http.client.ssl is ssl
print(json.dumps(out))
"""


def _run(imports=""):
    code = CHECK.replace("ROOT", repr(ROOT)).replace("IMPORTS", imports)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONWARNINGS": "error"})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("first", ["", "import http.client", "from ssl import SSLContext",
                                   "from subprocess import Popen", "import gevent.subprocess",
                                   "import gevent.ssl"])
def test_ssl_and_subprocess_are_patched_by_their_first_import(first):
    out = _run(first)
    assert out["loaded_before"] == []  # not imported by patching: start-up stays short
    assert out["ssl_patched"] and out["ssl_socket"] and out["popen"] and out["one_module"]
    assert out["spec"] == ["SourceFileLoader", "SourceFileLoader"]  # the real specs back
    assert out["finder_left"] == []  # both patched: the finder is gone
    assert out["http_client"]


def test_the_agent_s_start_up_path_does_not_import_them():
    out = _run("import term2acp.server, term2acp.warmup\n"
               "from term2acp.warmup import SESSION_LAYER, STORE_MODULE\n"
               "import importlib\n"
               "[importlib.import_module(m) for m in (STORE_MODULE,) + SESSION_LAYER]\n"
               "out['loaded_before'] = [m for m in ('ssl', 'subprocess') if m in sys.modules]")
    assert out["loaded_before"] == []


def test_the_collector_is_held_during_start_up_and_collects_again_after():
    out = _run("import gc, weakref\n"
               "from term2acp.core.pacing import start_up_done\n"
               "import term2acp.server\n"
               "class Cycle: pass\n"
               "garbage = Cycle(); garbage.me = garbage; gone = weakref.ref(garbage); del garbage\n"
               "out['held'] = not gc.isenabled() and gone() is not None\n"
               "out['young_before'] = gc.get_count()[0]\n"
               "start_up_done()\n"
               "out['after'] = gc.isenabled()\n"
               "out['collected'] = gone() is None\n"
               "out['young_after'] = len(gc.get_objects(0)) + len(gc.get_objects(1))\n"
               "out['frozen'] = gc.get_freeze_count()\n"
               "out['server_old'] = any(o is term2acp.server.Server for o in gc.get_objects(2))")
    assert out["held"] is True and out["after"] is True
    assert out["collected"] is True  # start-up's garbage is freed
    # and what lives on went to the oldest generation, where young collections leave it
    assert out["young_before"] > 5000 and out["young_after"] < 100
    assert out["frozen"] == 0 and out["server_old"]


def test_a_held_collector_collects_again_after_the_bound_at_the_latest():
    out = _run("import gc\n"
               "from gevent.event import Event\n"
               "from term2acp.core import pacing\n"
               "fired, real = Event(), pacing.start_up_done\n"
               "pacing.start_up_done = lambda: (real(), fired.set())\n"
               "pacing.hold_collector(0.05)\n"
               "out['held'] = not gc.isenabled()\n"
               "out['fired'] = fired.wait(10)\n"
               "out['after'] = gc.isenabled()")
    assert out["held"] is True and out["fired"] is True and out["after"] is True


def test_start_up_imports_the_v1_face_only_when_v1_is_negotiated(tmp_path):
    out = _run("from term2acp.settings import Settings\n"
               "from term2acp.warmup import Warmup\n"
               f"warmup = Warmup(Settings(data_dir={str(tmp_path)!r}))\n"
               "warmup.start()\n"
               "out['v1_at_start'] = 'term2acp.acp.v1.routes' in sys.modules\n"
               "out['v2_at_start'] = 'term2acp.acp.sessions' in sys.modules\n"
               "warmup.schedule(1)\n"
               "out['v1_after'] = 'term2acp.acp.v1.routes' in sys.modules\n"
               "warmup.wait(timeout=30)\n")
    assert out["v2_at_start"] and not out["v1_at_start"] and out["v1_after"]


LOCKS = r"""
import json, sys, threading
sys.path.insert(0, ROOT)
from gevent.monkey import _patch_thread_common as common
calls = []
full = common._patch_existing_locks
common._patch_existing_locks = lambda threading: (calls.append("full"), full(threading))[1]
native = type(threading._active_limbo_lock)
BEFORE
from term2acp.patching import patch_all
patch_all()
import gevent, gevent.lock
gevent.get_hub()
made_hub_without_pprint = "pprint" not in sys.modules
out = {"hub_without_pprint": made_hub_without_pprint, "walked": calls, "limbo_native": type(threading._active_limbo_lock) is native,
       "restored": common._patch_existing_locks.__name__ == "<lambda>"}
results = []
workers = [threading.Thread(target=results.append, args=(n,)) for n in range(3)]
for worker in workers:
    worker.start()
for worker in workers:
    worker.join(5)
out["threads"] = sorted(results)
pool = gevent.get_hub().threadpool
out["native_thread"] = pool.spawn(lambda: 6 * 7).get(timeout=5)
out["enumerate"] = len(threading.enumerate()) >= 1
out["format_context"] = gevent.get_hub().format_context.__qualname__
out["formats"] = gevent.get_hub().format_context({"k": [1] * 3})
print(json.dumps(out))
"""


def _locks(before="", **env):
    code = LOCKS.replace("ROOT", repr(ROOT)).replace("BEFORE", before)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONWARNINGS": "error", **env})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_launcher_s_patch_skips_gevent_s_heap_walk_and_keeps_the_rest():
    out = _locks()
    assert out["walked"] == []  # the heap walk did not run
    assert out["limbo_native"] is False  # threading's registry lock is a gevent lock
    assert out["restored"]  # gevent's pass is put back for anyone patching later
    assert out["threads"] == [0, 1, 2] and out["native_thread"] == 42 and out["enumerate"]


def test_patching_inside_an_import_runs_gevent_s_own_pass(tmp_path):
    # a module that patches as it is imported: the import system holds its module lock,
    # which gevent's pass hands over to the main greenlet
    (tmp_path / "patches_on_import.py").write_text(
        f"import sys\nsys.path.insert(0, {ROOT!r})\n"
        "from term2acp.patching import patch_all\npatch_all()\n")
    out = _locks(f"sys.path.insert(0, {str(tmp_path)!r})\nimport patches_on_import")
    assert out["walked"] == ["full"]
    assert out["limbo_native"] is False
    assert out["threads"] == [0, 1, 2] and out["native_thread"] == 42


def test_the_hub_formats_a_greenlet_s_context_as_gevent_does_importing_pprint_late():
    out = _locks()
    assert out["hub_without_pprint"] is True  # nor dataclasses, which pprint imports
    assert out["format_context"] == "context_repr"
    assert out["formats"] == "{'k': [1, 1, 1]}"  # pprint.saferepr's text


def test_a_user_s_own_context_formatter_is_kept():
    out = _locks(GEVENT_FORMAT_CONTEXT="builtins.ascii")
    assert out["format_context"] == "ascii"
