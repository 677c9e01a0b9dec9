"""How session updates look in a terminal: text plain, thoughts dim, diffs coloured."""

import base64
import re
import sys

DIM, RESET, RED, GREEN, CYAN, BOLD = "\x1b[2m", "\x1b[0m", "\x1b[31m", "\x1b[32m", "\x1b[36m", "\x1b[1m"
# What an agent's or a command's text may not make the terminal do: every control
# character but newline and tab (ESC sequences retitle the window or clear the screen),
# and the invisible format characters (bidi overrides turn a line around)
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")


def shown(text):
    """``text`` safe to print: each control character as a visible escape (``\\x1b``)."""
    text = str(text)
    if text.isprintable() or not _CONTROLS.search(text):
        return text
    return _CONTROLS.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


ICONS = {"pending": "…", "in_progress": "▶", "completed": "✔", "failed": "✘", "cancelled": "⊘"}


class Renderer:
    def __init__(self, out=sys.stdout, color=None):
        self.out = out
        self.color = out.isatty() if color is None else color
        self.tools = {}  # toolCallId -> title
        self.mode = None  # "text" | "thought" | None: what the current line is
        self.spoke = False  # the agent said something this turn (a failure's own message)
        self.shown_mode = None  # the session's mode as last seen (a switch is announced)

    def begin_turn(self):
        self.spoke = False

    def _paint(self, code, text):
        text = shown(text)
        return f"{code}{text}{RESET}" if self.color else text

    def _write(self, text):
        self.out.write(text)
        self.out.flush()

    def _newline(self):
        if self.mode is not None:
            self._write("\n")
            self.mode = None

    def update(self, update):
        kind = update.get("sessionUpdate")
        handler = getattr(self, "_" + str(kind), None)
        if handler is not None:
            handler(update)

    def _agent_message_chunk(self, u):
        self.spoke = True
        if self.mode != "text":
            self._newline()
            self.mode = "text"
        self._write(shown(u["content"].get("text", "")))

    def _agent_thought_chunk(self, u):
        if self.mode != "thought":
            self._newline()
            self.mode = "thought"
        self._write(self._paint(DIM, u["content"].get("text", "")))

    def _agent_message(self, u):
        self._newline()
        self._write(shown("".join(c.get("text", "") for c in u.get("content") or [])) + "\n")

    def _agent_thought(self, u):
        self._newline()
        text = "".join(c.get("text", "") for c in u.get("content") or [])
        self._write(self._paint(DIM, text) + "\n")

    def _user_message(self, u):
        if u.get("_replay"):
            text = " ".join(c.get("text", "") for c in u.get("content") or [])
            self._write(self._paint(BOLD, "> " + text) + "\n")

    def _tool_call_update(self, u):
        call_id = u["toolCallId"]
        if u.get("title"):
            self.tools[call_id] = u["title"]
        status = u.get("status")
        if status:
            self._newline()
            icon = ICONS.get(status, "?")
            raw = u.get("rawOutput") if isinstance(u.get("rawOutput"), dict) else {}
            if status == "completed" and raw.get("running") is True:  # a background process
                icon, status = "▶", "running in the background"
            self._write(self._paint(CYAN, f"{icon} {self.tools.get(call_id, call_id)} [{status}]") + "\n")
        for item in u.get("content") or []:
            self._tool_content(item, status)

    def show_diff(self, item):
        self._tool_content(item, "pending")

    def _tool_content(self, item, status):
        if item.get("type") == "diff" and item.get("patch"):
            for line in item["patch"]["text"].splitlines():
                code = GREEN if line.startswith("+") else RED if line.startswith("-") else DIM
                self._write(self._paint(code, line) + "\n")
        elif item.get("type") == "content" and status == "failed":
            self._write(self._paint(RED, "  " + item["content"].get("text", "")[:2000]) + "\n")
        elif item.get("type") == "content" and item["content"].get("type") == "resource_link":
            link = item["content"]  # a web search's result: its title and address
            uri, name = link.get("uri", ""), link.get("name", "")
            shown = f"  {name} <{uri}>" if name and name != uri else f"  <{uri}>"
            self._write(self._paint(DIM, shown) + "\n")

    def _terminal_output_chunk(self, u):
        self._newline()
        data = base64.b64decode(u.get("data", "")).decode("utf-8", "replace")
        self._write(self._paint(DIM, data))

    def _state_update(self, u):
        if u.get("state") == "idle":
            self._newline()
            reason = u.get("stopReason")
            if reason and reason != "end_turn":
                # a failure is said once: by the agent's message when it sent one
                detail = "" if self.spoke else (u.get("_meta") or {}).get("term2", {}).get("error", "")
                shown = "failed" if reason.startswith("_") else reason  # _term2_error
                self._write(self._paint(RED, f"[{shown}] {detail}".rstrip()) + "\n")

    def _config_option_update(self, u):
        """A mode switch (plan mode's start, /mode) is said once, when it happens."""
        mode = next((o.get("currentValue") for o in u.get("configOptions") or []
                     if o.get("category") == "mode"), None)
        if mode is not None and mode != self.shown_mode:
            if self.shown_mode is not None:
                self._newline()
                self._write(self._paint(CYAN, f"[mode: {mode}]") + "\n")
            self.shown_mode = mode

    def _usage_update(self, u):
        pass
