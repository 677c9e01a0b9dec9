"""What makes term2-acp-chat usable every day: line editing and history, the agent's log
kept out of the answer, the banner at start and ``/help``."""

import os
import sys

from term2acp.client.render import DIM, RESET
from term2acp.core import private

HISTORY_LENGTH = 1000


def data_dir():
    from term2acp.settings import data_dir as agent_data_dir

    return agent_data_dir(os.environ)


def line_editing():
    """Arrow keys, Ctrl-R and the history of earlier prompts (kept in the data directory)
    for ``input()``; only at a terminal."""
    if not sys.stdin.isatty():
        return
    try:
        import readline
    except ImportError:  # a Python built without it: plain input
        return
    import atexit

    path = os.path.join(data_dir(), "chat_history")
    try:
        readline.read_history_file(path)
    except OSError:
        pass
    readline.set_history_length(HISTORY_LENGTH)

    def save():
        try:
            private.make_dirs(os.path.dirname(path))
            private.create_file(path)  # the prompts: the user's alone
            readline.write_history_file(path)
        except OSError:
            pass
    atexit.register(save)


class Unwritable(Exception):
    """The data folder cannot be made or written; the message says what to do."""


def agent_log():
    """The file the agent's stderr goes to (its log lines would mix with the answer)."""
    folder = data_dir()
    path = os.path.join(folder, "chat-agent.log")
    try:
        private.make_dirs(folder)
        private.create_file(path)  # the agent's log: the user's alone
    except OSError as exc:
        raise Unwritable(
            f"cannot write term2's data folder {folder} ({exc.strerror or exc}); a read-only "
            "HOME? Set TERM2ACP_HOME to a writable folder (e.g. TERM2ACP_HOME=$(mktemp -d)) "
            "and start again.") from None
    return path


def log_size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def last_lines(path, count=3, since=0):
    """The last ``count`` lines written to the log after offset ``since`` (this run's)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(max(since, os.path.getsize(path) - 4096))
            lines = fh.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return []
    return [line for line in lines if line.strip()][-count:]


def ask(prompt):
    """``input(prompt)`` for a permission answer: the answer stays out of the prompts'
    history (Up recalls prompts, not "1")."""
    try:
        import readline  # line editing (line_editing) imported it at a terminal
    except ImportError:  # a Python built without it: plain input, no history
        return input(prompt)
    before = readline.get_current_history_length()
    answer = input(prompt)
    after = readline.get_current_history_length()
    if after > before:
        readline.remove_history_item(after - 1)
    return answer


def note(text, color=None):
    """A line of the chat itself (not the agent's answer), dimmed on stderr."""
    color = sys.stderr.isatty() if color is None else color
    sys.stderr.write(f"{DIM}{text}{RESET}\n" if color else f"{text}\n")
    sys.stderr.flush()


def banner(result, session_id, cwd, log):
    """Model, session and project at start, from session/new's or resume's answer."""
    model = next((option.get("currentValue") for option in result.get("configOptions") or []
                  if option.get("category") == "model"), None)
    return (f"model {model or 'unknown'} · session {session_id} · {cwd}\n"
            f"agent log: {log} · /help for help")


def help_text(commands):
    lines = ["Type a prompt and press Enter; an empty line or Ctrl-D quits.",
             "Ctrl-C cancels the running turn (a second one quits); arrow keys and Ctrl-R "
             "edit and search earlier prompts.",
             "/help  this help"]
    for command in commands:
        hint = (command.get("input") or {}).get("hint")
        name = f"/{command['name']}" + (f" <{hint}>" if hint else "")
        lines.append(f"{name:<16} {command.get('description', '')}")
    return "\n".join(lines)
