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
    out = _run("from term2acp.core.pacing import start_up_done\n"
               "out['held'] = not __import__('gc').isenabled()\n"
               "start_up_done()\n"
               "out['after'] = __import__('gc').isenabled()")
    assert out["held"] is True and out["after"] is True


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
