"""The editor's file access for one session: ACP v1 ``fs/read_text_file`` and
``fs/write_text_file``, offered to the tools through the hook in ``tools/base.py``.

Used only when the client advertised the capability, and only after the tools' own path
policy has resolved and approved the target (see ``tools/editor_io.py``). Any failure (an
error answer, a malformed one, no answer in ``TIMEOUT`` seconds, a disconnect) is an :class:`EditorError`: a failed tool call, never
a silent local read or write instead.
"""

import logging

import gevent

from term2acp.acp import methods
from term2acp.rpc.errors import RpcError
from term2acp.tools.base import EditorError

log = logging.getLogger(__name__)

TIMEOUT = 30.0  # seconds an editor may take to read a file


class EditorFiles:
    """``write_timeout``: an editor may ask the user before it saves (acpx, Zed's review):
    a write waits as long as a permission request does (``approval_timeout``; None: until
    the turn is cancelled)."""

    def __init__(self, client, session_id, can_read, can_write, write_timeout=None):
        self._client = client
        self._session_id = session_id
        self.can_read = can_read
        self.can_write = can_write
        self._write_timeout = write_timeout

    def read_text(self, path):
        result = self._call(methods.FS_READ_TEXT_FILE, {"sessionId": self._session_id,
                                                        "path": path})
        content = result.get("content") if isinstance(result, dict) else None
        if not isinstance(content, str):
            raise EditorError(f"The editor's answer to reading {path} had no text content; "
                              "nothing was read.")
        return content

    def write_text(self, path, text):
        self._call(methods.FS_WRITE_TEXT_FILE, {"sessionId": self._session_id, "path": path,
                                                "content": text})

    def _call(self, method, params):
        verb = "reading" if method == methods.FS_READ_TEXT_FILE else "writing"
        timeout = TIMEOUT if verb == "reading" else self._write_timeout
        try:
            return self._client.call(method, params, timeout)
        except gevent.Timeout:
            raise EditorError(f"The editor did not answer within {timeout:g}s while {verb} "
                              f"{params['path']}; nothing was {'read' if verb == 'reading' else 'written'}.") from None
        except RpcError as exc:
            reason = editor_reason(exc)
            log.info("%s %s failed: %s", method, params["path"], reason)
            raise EditorError(f"The editor refused {verb} {params['path']}: {reason}") from None


REASON_CAP = 500  # characters of an editor's own words kept in a tool result


def editor_reason(exc):
    """The editor's own words for a refusal: its message, and what its ``data`` says (acpx
    answers "Internal error" with the reason in ``data.details``), on one bounded line."""
    parts = [exc.message]
    data = exc.data
    if isinstance(data, str):
        parts.append(data)
    elif isinstance(data, dict):
        parts += [data[key] for key in ("details", "message", "reason", "error")
                  if isinstance(data.get(key), str)]
    words = []
    for part in parts:
        line = " ".join(part.split())
        if line and line not in words:
            words.append(line)
    reason = ": ".join(words) or "no reason given"
    return reason if len(reason) <= REASON_CAP else reason[:REASON_CAP - 1] + "…"
