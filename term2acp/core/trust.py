"""Trust in what a repository supplies: a file used only after the user approved it.

What a workspace brings that runs or steers (project hooks, a command with a shell
expansion, ``.mcp.json`` servers, skills and agent files) is untrusted until the user says
so for that file's exact content:

* a file, or the folder holding it, owned by another user than ours (or root) is never
  used and never asked about; the user is told once which file it was
  (:func:`foreign_owner`, the check ``AGENTS.md`` uses too);
* an *allow always* is remembered per path and SHA-256 in ``trust.json`` of our data dir
  (0600; it survives restarts, and every agent of the user reads it);
* an *allow once* counts for the session, a *reject* too (that file is not used in that
  session, and not asked about again; the turn goes on);
* otherwise the user is asked (``session/request_permission``, naming the file and its
  SHA-256, the body shown); anything but an allow (cancel, disconnect, timeout) rejects.

A changed file has another hash, so it is asked about again.

The API (``decide`` is what callers use)::

    from term2acp.core import trust
    used = trust.decide(session, settings, path, content, ask, purpose="hooks")

``content`` is the file's bytes (or text) as the caller read them and will use them;
``ask(request)`` asks the user about a ``core.approvals.ApprovalRequest`` (variant
``TRUST``) and returns the allowed choice id or None: a running tool passes ``ctx.choose``,
the turn ``turns/trusting.py``'s ``asker(turn)``. ``decide`` returns True only when the
content may be used.
"""

import fcntl
import hashlib
import json
import logging
import os

from term2acp.core import events as ev
from term2acp.core import private
from term2acp.core.approvals import TRUST, ApprovalRequest
from term2acp.core.ids import new_id

log = logging.getLogger(__name__)

FILE = "trust.json"
SHOWN_CAP = 16_000  # characters of the body shown in the question
ALWAYS, ONCE = "trust-always", "trust-once"


def foreign_owner(path):
    """The uid owning ``path`` or its directory when it is neither ours nor root's, else
    None (git's ``safe.directory`` reasoning: anyone can write into a world-writable
    parent such as ``/tmp``)."""
    trusted = (os.geteuid(), 0)
    for item in (path, os.path.dirname(path)):
        try:
            owner = os.stat(item, follow_symlinks=False).st_uid
        except OSError:
            continue
        if owner not in trusted:
            return owner
    return None


def foreign_notice(path, owner):
    return (f"Ignored {path}: it (or its folder) belongs to another user (uid {owner}), so "
            "it could steer the model; change its owner to use it.")


def sha256(content):
    if isinstance(content, str):
        content = content.encode("utf-8")
    return hashlib.sha256(content).hexdigest()


class Remembered:
    """The *allow always* answers: ``trust.json`` in the data dir, re-read when it changes
    (another agent of the user may have added one)."""

    def __init__(self, data_dir):
        self.path = os.path.join(data_dir, FILE) if data_dir else ""
        self._seen = None  # (size, mtime_ns) of what _allowed holds
        self._allowed = {}

    def _load(self):
        if not self.path:
            return
        try:
            info = os.stat(self.path)
        except OSError:
            self._seen, self._allowed = None, {}
            return
        signature = (info.st_size, info.st_mtime_ns)
        if signature == self._seen:
            return
        self._seen, self._allowed = signature, self._read()

    def _read(self):
        try:
            with open(self.path, encoding="utf-8") as fh:
                data = json.load(fh)
            allowed = data.get("allowed", {}) if isinstance(data, dict) else {}
            return {path: set(digests) for path, digests in allowed.items()
                    if isinstance(path, str) and isinstance(digests, list)}
        except (OSError, ValueError, TypeError, AttributeError):
            log.warning("%s is unreadable; no file is remembered as trusted", self.path)
            return {}

    def allowed(self, path, digest):
        self._load()
        return digest in self._allowed.get(path, ())

    def remember(self, path, digest):
        """Add ``(path, digest)``: read, merged and replaced under a lock (0600)."""
        if not self.path:
            return
        folder = os.path.dirname(self.path)
        private.make_dirs(folder)
        lock = os.open(self.path + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            allowed = self._read() if os.path.exists(self.path) else {}
            allowed.setdefault(path, set()).add(digest)
            text = json.dumps({"version": 1, "allowed": {p: sorted(d) for p, d in
                                                        sorted(allowed.items())}}, indent=1)
            private.replace(self.path, text)
            self._seen, self._allowed = None, allowed
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            os.close(lock)


_remembered = {}  # data dir -> Remembered (one per agent process and data dir)


def remembered(data_dir):
    found = _remembered.get(data_dir)
    if found is None:
        found = _remembered[data_dir] = Remembered(data_dir)
    return found


class SessionTrust:
    """One session's answers: ``(path, digest) -> True/False`` and the foreign files told."""

    def __init__(self):
        self.answers = {}
        self.told = set()


def of(session):
    state = session.trust
    if state is None:
        state = session.trust = SessionTrust()
    return state


def usable(session, path):
    """False (and the user told once) when ``path`` or its folder belongs to another user;
    callers check this before reading a project file at all."""
    owner = foreign_owner(path)
    if owner is None:
        return True
    state = of(session)
    if (path, owner) not in state.told:
        state.told.add((path, owner))
        session.emit(ev.ThoughtChunk(new_id("thought"), foreign_notice(path, owner)))
    return False


def question(path, digest, content, purpose):
    """The ``ApprovalRequest`` asking about ``path`` at ``digest``."""
    text = content.decode("utf-8", "replace") if isinstance(content, bytes) else str(content)
    if len(text) > SHOWN_CAP:
        text = text[:SHOWN_CAP] + "\n[... longer; the rest is not shown ...]"
    what = f" ({purpose})" if purpose else ""
    head = (f"The workspace supplies {path}{what}. It runs or steers the agent only if you "
            f"trust this content.\nFile: {path}\nSHA-256: {digest}\n\n")
    return ApprovalRequest(variant=TRUST, path=path, grant=("trust", path, digest),
                           title=f"Trust {os.path.basename(path)}{what}? sha256 {digest[:12]}",
                           content=[{"type": "text", "text": head + text}])


def decide(session, settings, path, content, ask, purpose=""):
    """True when ``content`` (read from ``path``) may be used in ``session``: not foreign,
    and allowed always (remembered), once or now; the user is asked at most once per
    session and content (module docstring)."""
    path = os.path.abspath(path)
    if not usable(session, path):
        return False
    digest = sha256(content)
    state = of(session)
    key = (path, digest)
    if key in state.answers:
        return state.answers[key]
    store = remembered(settings.data_dir)
    if store.allowed(path, digest):
        state.answers[key] = True
        return True
    choice = ask(question(path, digest, content, purpose))
    allowed = choice in (ALWAYS, ONCE)
    if choice == ALWAYS:
        try:
            store.remember(path, digest)
        except OSError as exc:  # still allowed for this session
            log.warning("cannot remember trust in %s: %s", store.path, exc)
    state.answers[key] = allowed
    return allowed

