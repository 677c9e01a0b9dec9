"""A command's output as the editor's own terminal, for v1 clients that advertise
``clientCapabilities._meta.terminal_output: true`` (Zed).

v1 has no agent-owned terminals; Zed shows one when a tool call's updates carry these
``_meta`` entries (the shapes claude-agent-acp and codex-acp send, which Zed reads):

* the first report, ``tool_call``, carries ``_meta.terminal_info {terminal_id, cwd}`` and
  ``content [{type: "terminal", terminalId}]``: Zed makes a display-only terminal for it
  then, and only then (it reads ``terminal_info`` from ``tool_call`` alone), so every call
  of a tool that runs a command in a terminal of its own (``TOOLS``) announces one before
  anything runs;
* each piece of output is a ``tool_call_update`` with ``_meta.terminal_output
  {terminal_id, data}``: the new text only (Zed appends it), decoded as UTF-8;
* the exit is a ``tool_call_update`` with ``_meta.terminal_exit {terminal_id, exit_code,
  signal}`` (``exit_code`` null when a signal ended it), before the call's final status.

The terminal's id is the tool call's id (one terminal per call: the first command it
runs; a later one in the same call is shown as text, as for other clients). A background
process (``shell`` with ``background``) keeps streaming into the terminal of the call that
started it after that call has ended, until it exits.
"""

import base64
import codecs

TOOLS = frozenset({"shell", "run_code"})  # the tools whose calls run a terminal of their own


def info(call_id, cwd):
    meta = {"terminal_id": call_id}
    if cwd:
        meta["cwd"] = cwd
    return {"terminal_info": meta}


def content(call_id):
    return [{"type": "terminal", "terminalId": call_id}]


def output_update(call_id, text):
    return {"sessionUpdate": "tool_call_update", "toolCallId": call_id,
            "_meta": {"terminal_output": {"terminal_id": call_id, "data": text}}}


def exit_update(call_id, exit_code=None, signal=None):
    code = exit_code if exit_code is not None and exit_code >= 0 else None
    if code is None and not signal:
        signal = "SIGKILL"  # ended without a status (cancelled before it was reaped)
    return {"sessionUpdate": "tool_call_update", "toolCallId": call_id,
            "_meta": {"terminal_exit": {"terminal_id": call_id, "exit_code": code,
                                        "signal": signal or None}}}


class Stream:
    """One call's terminal: runtime output bytes in, text deltas out."""

    def __init__(self, call_id):
        self.call_id = call_id
        self.exited = False
        self.call_done = False  # the call has its final status (a background process runs on)
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def output(self, data):
        text = self._decoder.decode(data)
        return [output_update(self.call_id, text)] if text else []

    def exit(self, exit_code, signal):
        self.exited = True
        tail = self._decoder.decode(b"", final=True)
        out = [output_update(self.call_id, tail)] if tail else []
        return out + [exit_update(self.call_id, exit_code, signal)]


def replayed(call_id, terminal):
    """The updates that restore a finished call's terminal on ``session/load``: its
    whole output, then its exit (``terminal`` is the journal's record of it)."""
    data = base64.b64decode(terminal.get("output") or "")
    text = data.decode("utf-8", "replace")
    updates = [output_update(call_id, text)] if text else []
    status = terminal.get("exit") or {}
    updates.append(exit_update(call_id, status.get("exit_code"), status.get("signal")))
    return updates
