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
import json
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
_COLUMNS = ("id", "cwd", "title", "created_at", "updated_at", "provider", "model", "effort",
            "mode", "mcp_servers")


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
    rows = store.rows(f"SELECT {', '.join(_COLUMNS)} FROM sessions WHERE id = ?", (session_id,))
    if not rows:
        return None
    session = dict(zip(_COLUMNS, rows[0]))
    session["mcp_servers"] = json.loads(session["mcp_servers"] or "[]")
    history = [json.loads(m) for (m,) in store.rows(
        "SELECT message FROM history WHERE session_id = ? ORDER BY seq", (session_id,))]
    journal = [{"kind": k, "key": key, "payload": json.loads(p)} for k, key, p in store.rows(
        "SELECT kind, key, payload FROM journal WHERE session_id = ? ORDER BY seq",
        (session_id,))]
    recording = []
    for kind, turn, payload, content in store.rows(
            "SELECT kind, turn, payload, content FROM recording WHERE session_id = ?"
            " ORDER BY seq", (session_id,)):
        item = {"kind": kind, "turn": turn, "payload": redact(json.loads(payload))}
        if content is not None:
            item["content"] = base64.b64encode(content).decode("ascii")
        recording.append(item)
    turns = [{"number": n, "messageId": m, "prompt": p, "state": s} for n, m, p, s in store.rows(
        "SELECT number, message_id, prompt, state FROM turns WHERE session_id = ?"
        " ORDER BY number", (session_id,))]
    before = []  # each file a turn changed, as it was before the first such turn
    for path, state, mode, content in store.rows(
            "SELECT f.path, f.state, f.mode, f.content FROM checkpoint_files f JOIN turns t ON"
            " t.session_id = f.session_id AND t.message_id = f.turn WHERE f.session_id = ?"
            " AND f.state IN ('file', 'link', 'absent') ORDER BY t.number", (session_id,)):
        if all(item["path"] != path for item in before):
            before.append({"path": path, "state": state, "mode": mode, "content":
                           base64.b64encode(content or b"").decode("ascii")})
    return {"format": FORMAT, "version": VERSION, "exportedAt": now(),
            "session": redact(session), "history": redact(history),
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
    session = document["session"]
    stamp = now()
    store.write("INSERT INTO sessions (id, cwd, title, created_at, updated_at, provider, model,"
                " effort, mode, mcp_servers) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (session_id, session["cwd"], session.get("title"),
                 session.get("created_at") or stamp, stamp, session.get("provider"),
                 session.get("model"), session.get("effort"), session.get("mode"),
                 json.dumps(session["mcp_servers"]) if session.get("mcp_servers") else None),
                session_id)
    for seq, message in enumerate(document.get("history", []), 1):
        store.write("INSERT INTO history (session_id, seq, message) VALUES (?, ?, ?)",
                    (session_id, seq, json.dumps(message)), session_id)
    for seq, record in enumerate(document.get("journal", []), 1):
        store.write("INSERT INTO journal (session_id, seq, kind, key, payload) VALUES"
                    " (?, ?, ?, ?, ?)", (session_id, seq, record["kind"], record["key"],
                                         json.dumps(record["payload"])), session_id)
    for seq, item in enumerate(document.get("recording", []), 1):
        content = base64.b64decode(item["content"]) if item.get("content") else None
        store.write("INSERT INTO recording (session_id, seq, kind, turn, payload, content)"
                    " VALUES (?, ?, ?, ?, ?, ?)", (session_id, seq, item["kind"],
                                                   item.get("turn"),
                                                   json.dumps(item["payload"]), content),
                    session_id)
    store.commit()
