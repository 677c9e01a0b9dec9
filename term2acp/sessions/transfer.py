"""A stored session as one versioned JSON document, and back (``term2acp sessions export``
and ``import``).

The document keeps what a resume needs (the session's row and config option values, the
model-facing conversation, the replay journal) and what an export shows or a pytest
export replays (``recording``: the model's replies, the permission questions and answers,
the files as first touched, their contents in base64; ``checkpoints``, what the turns'
changes replaced, for the files a command changed). Never a key: the store holds none
(the MCP servers are described without env or header values), and text that looks like
a credential (a bearer token, ``api_key=...``) is redacted on the way out.
"""

import base64
import re

from term2acp.sessions.store.api import now

FORMAT = "term2acp-session"
VERSION = 1
# Stricter than the permission description's redaction (acp/v2/permissions.py): an export
# must round-trip, so code such as ``token = next(tokens)`` in a diff stays as it is.
_SECRETS = (
    (re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"), r"\1<redacted>"),
    (re.compile(r"\b(sk|pk|rk|ghp|gho|xox[abp])[-_][A-Za-z0-9_-]{16,}"), "<redacted>"),
    (re.compile(r"(?i)((?:api[_-]?key|secret[_-]?key|access[_-]?token|password)"
                r"[\"']?\s*[:=]\s*[\"']?)[^\s\"',;]{6,}"), r"\1<redacted>"),
)


class TransferError(ValueError):
    pass


def redact(value):
    if isinstance(value, str):
        for pattern, replacement in _SECRETS:
            value = pattern.sub(replacement, value)
        return value
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, dict):
        return {k: redact(v) for k, v in value.items()}
    return value


def dump(store, session_id):
    """The session's document, or None for an id the store does not know."""
    rows = store.documents.read(session_id)
    if rows is None:
        return None
    journal = [{"kind": k, "key": key, "payload": payload} for k, key, payload in rows["journal"]]
    recording = []
    for kind, turn, payload, content in rows["recording"]:
        item = {"kind": kind, "turn": turn, "payload": redact(payload)}
        if content is not None:
            item["content"] = base64.b64encode(content).decode("ascii")
        recording.append(item)
    turns = [{"number": n, "messageId": m, "prompt": p, "state": s}
             for n, m, p, s in rows["turns"]]
    before = []  # each file a turn changed, as it was before the first such turn
    for path, state, mode, content in rows["checkpoints"]:
        if all(item["path"] != path for item in before):
            before.append({"path": path, "state": state, "mode": mode, "content":
                           base64.b64encode(content or b"").decode("ascii")})
    return {"format": FORMAT, "version": VERSION, "exportedAt": now(),
            "session": redact(rows["session"]), "history": redact(rows["history"]),
            "journal": redact(journal), "recording": recording, "turns": turns,
            "checkpoints": before}


def check(document):
    """Raise TransferError unless ``document`` is an export this version reads."""
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise TransferError(f'not a term2acp session export (no "format": "{FORMAT}")')
    version = document.get("version")
    if not isinstance(version, int) or version > VERSION or version < 1:
        raise TransferError(f"export version {version!r} is not one this term2acp reads "
                            f"(it reads 1 to {VERSION})")
    session = document.get("session")
    if not isinstance(session, dict) or not isinstance(session.get("id"), str) or \
            not isinstance(session.get("cwd"), str):
        raise TransferError('the export has no "session" with an "id" and a "cwd"')
    for key in ("history", "journal", "recording"):
        if not isinstance(document.get(key, []), list):
            raise TransferError(f'"{key}" must be a list')
    for n, record in enumerate(document.get("journal", []), 1):
        if not isinstance(record, dict) or not all(isinstance(record.get(k), str)
                                                   for k in ("kind", "key")) \
                or "payload" not in record:
            raise TransferError(f'journal record {n}: needs "kind", "key" and "payload"')
    for n, item in enumerate(document.get("recording", []), 1):
        if not isinstance(item, dict) or not isinstance(item.get("kind"), str) or \
                "payload" not in item:
            raise TransferError(f'recording item {n}: needs "kind" and "payload"')
        try:
            base64.b64decode(item.get("content") or "", validate=True)
        except (ValueError, TypeError):
            raise TransferError(f'recording item {n}: "content" is not base64') from None


def load(store, document, session_id):
    """Write the document as the session ``session_id`` (free), committed."""
    check(document)
    recording = [(item["kind"], item.get("turn"), item["payload"],
                  base64.b64decode(item["content"]) if item.get("content") else None)
                 for item in document.get("recording", [])]
    store.documents.write(session_id, document["session"], document.get("history", []),
                          [(r["kind"], r["key"], r["payload"]) for r in document.get("journal", [])],
                          recording, now())
