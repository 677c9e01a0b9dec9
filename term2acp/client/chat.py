"""term2-acp-chat: talk to an ACP v2 agent from a terminal.

Usage:
  term2-acp-chat [options] [<prompt>]
  term2-acp-chat --list [options]
  term2-acp-chat -h | --help

Options:
  --cwd <dir>             Project directory (the session root) [default: .].
  --list                  List the sessions of the project and exit.
  --resume <id>           Continue an earlier session.
  --replay                With --resume: show the conversation so far first.
  --approve <mode>        Permission answers: ask, never (reject) or once (allow once)
                          [default: ask].
  --record <file>         Write the wire transcript ('>' sent, '<' received) to <file>.
  --agent <command>       Agent command line [default: term2-acp].
  --provider <provider>   Passed to the agent.
  --model <model>         Passed to the agent.
  --effort <effort>       Passed to the agent.
  -h --help               Show this help.

With a prompt it runs one turn and exits (status 0 when the turn ends normally); without
one it reads prompts until an empty line or end of input. Ctrl-C cancels the running
turn; a second Ctrl-C quits.
"""

import json
import os
import queue
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time

from term2acp.client import terminal
from term2acp.client.render import Renderer, shown
from term2acp.core import private

INTERRUPT_CHECK = 0.2  # seconds: how often a turn looks for a Ctrl-C while the agent is quiet


class AgentGone(Exception):
    pass


def agent_command(spec):
    if spec == "term2-acp" and not shutil.which("term2-acp"):
        return [sys.executable, "-m", "term2acp"]
    return shlex.split(spec)


class Connection:
    """Spawns the agent; the main thread handles every message from one queue."""

    def __init__(self, argv, record=None, log=None):
        # Its own process group: the terminal's Ctrl-C reaches only us, and we turn it
        # into session/cancel. The agent still exits when our pipe to it closes. Its
        # stderr (its log) goes to ``log``, not into the answer on the terminal.
        self.log = log
        err = os.fdopen(private.open_file(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND),
                        "ab") if log else None
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=err, start_new_session=True)
        finally:
            if err is not None:
                err.close()
        self.inbox = queue.Queue()
        self.record = open(record, "w", encoding="utf-8") if record else None
        self.next_id = 0
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            if self.record:
                self.record.write("< " + line.decode("utf-8", "replace").rstrip("\n") + "\n")
            try:
                self.inbox.put(json.loads(line))
            except ValueError:
                continue
        self.inbox.put(None)

    def send(self, message):
        text = json.dumps(message)
        if self.record:
            self.record.write("> " + text + "\n")
        try:
            self.proc.stdin.write(text.encode() + b"\n")
            self.proc.stdin.flush()
        except OSError:
            raise AgentGone("the agent closed its input") from None

    def request(self, method, params):
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.next_id

    def receive(self, timeout=None):
        message = self.inbox.get(timeout=timeout)
        if message is None:
            self.inbox.put(None)
            raise AgentGone("the agent exited")
        return message

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        if self.record:
            self.record.close()


class Chat:
    def __init__(self, conn, renderer, approve, ask=terminal.ask):
        self.conn = conn
        self.renderer = renderer
        self.approve = approve
        self.ask = ask
        self.session_id = None
        self.commands = []  # the agent's slash commands, for /help

    def call(self, method, params, on_update=None):
        """Send a request; handle everything that arrives until its response."""
        request_id = self.conn.request(method, params)
        while True:
            message = self.conn.receive()
            if message.get("id") == request_id and "method" not in message:
                if "error" in message:
                    raise RuntimeError(message["error"].get("message", "agent error"))
                return message["result"]
            self.dispatch(message, on_update)

    def dispatch(self, message, on_update=None):
        method = message.get("method")
        if method == "session/update":
            update = message["params"]["update"]
            if update.get("sessionUpdate") == "available_commands_update":
                self.commands = update.get("availableCommands") or []
            (on_update or self.renderer.update)(update)
            return update
        if method == "session/request_permission" and "id" in message:
            self.conn.send({"jsonrpc": "2.0", "id": message["id"],
                            "result": {"outcome": self.permission(message["params"])}})
        return None

    def drain(self, until_commands=2.0):
        """Handle what the agent sent between turns; wait up to ``until_commands`` seconds
        for the session's slash commands if they have not come yet (they follow its start)."""
        deadline = time.monotonic() + until_commands
        while True:
            wait = deadline - time.monotonic() if not self.commands else 0
            try:
                message = self.conn.inbox.get(timeout=wait) if wait > 0 else \
                    self.conn.inbox.get_nowait()
            except queue.Empty:
                return
            if message is None:
                self.conn.inbox.put(None)
                return
            self.dispatch(message)

    def permission(self, params):
        options = params.get("options") or []
        if self.approve != "ask":
            wanted = "allow_once" if self.approve == "once" else "reject_once"
            chosen = next((o for o in options if o["kind"] == wanted), None)
            return {"outcome": "selected", "optionId": chosen["optionId"]} if chosen \
                else {"outcome": "cancelled"}
        self.renderer._newline()
        # what the call would change comes with the question, before the answer is needed
        for item in ((params.get("subject") or {}).get("toolCall") or {}).get("content") or []:
            self.renderer.show_diff(item)
        print(shown(f"\n{params.get('title')}\n{params.get('description') or ''}"),
              file=sys.stderr)
        for n, option in enumerate(options, 1):
            print(f"  {n}. {shown(option['name'])}", file=sys.stderr)
        try:
            answer = self.ask("choose a number (empty = reject): ").strip()
            option = options[int(answer) - 1]
        except (ValueError, IndexError, EOFError):
            option = next((o for o in options if o["kind"].startswith("reject")), None)
        if option is None:
            return {"outcome": "cancelled"}
        return {"outcome": "selected", "optionId": option["optionId"]}

    def turn(self, text):
        """Run one prompt to its idle update; Ctrl-C cancels it (a second one quits).
        Returns the stop reason.

        Ctrl-C is counted by a handler and looked at between messages, at least every
        ``INTERRUPT_CHECK`` seconds: a KeyboardInterrupt could land anywhere (while an
        update is drawn, say) or wait, with the reader thread taking the signal, until
        the agent next said something."""
        self.renderer.begin_turn()
        self.call("session/prompt", {"sessionId": self.session_id,
                                     "prompt": [{"type": "text", "text": text}]})
        interrupts = []
        previous = signal.signal(signal.SIGINT, lambda *_: interrupts.append(True))
        try:
            cancelled = False
            while True:
                if len(interrupts) > 1:  # a second Ctrl-C: the client quits
                    raise KeyboardInterrupt
                if interrupts and not cancelled:
                    cancelled = True
                    self.conn.send({"jsonrpc": "2.0", "method": "session/cancel",
                                    "params": {"sessionId": self.session_id}})
                try:
                    message = self.conn.receive(timeout=INTERRUPT_CHECK)
                except queue.Empty:
                    continue
                update = self.dispatch(message)
                if update and update.get("sessionUpdate") == "state_update" \
                        and update.get("state") == "idle":
                    return update.get("stopReason")
        finally:
            signal.signal(signal.SIGINT, previous)


def main(argv=None):
    from docopt import docopt

    args = docopt(__doc__, argv=argv)
    if args["--approve"] not in ("ask", "never", "once"):
        print("term2-acp-chat: --approve must be ask, never or once", file=sys.stderr)
        return 2
    cwd = os.path.realpath(args["--cwd"])
    command = agent_command(args["--agent"])
    for flag in ("--provider", "--model", "--effort"):
        if args[flag]:
            command += [flag, args[flag]]
    try:
        log = terminal.agent_log()
    except terminal.Unwritable as exc:
        print(f"term2-acp-chat: {exc}", file=sys.stderr)
        return 1
    since = terminal.log_size(log)  # after a crash: this run's last words only
    conn = Connection(command, args["--record"], log)
    renderer = Renderer()
    chat = Chat(conn, renderer, args["--approve"] if sys.stdin.isatty() or args["--approve"] != "ask"
                else "never")
    try:
        return run(chat, args, cwd)
    except AgentGone as exc:
        print(f"term2-acp-chat: {exc}; its last words (in {log}):", file=sys.stderr)
        for line in terminal.last_lines(log, since=since):
            terminal.note(f"  {line}")
        return 1
    except RuntimeError as exc:
        print(f"term2-acp-chat: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        conn.close()


def run(chat, args, cwd):
    chat.call("initialize", {"protocolVersion": 2,
                             "info": {"name": "term2-acp-chat", "version": "1"}})
    if args["--list"]:
        result = chat.call("session/list", {"cwd": cwd})
        for s in result["sessions"]:
            print(shown(f"{s['sessionId']}  {s.get('updatedAt', '')}  {s.get('title') or ''}"))
        return 0
    if args["--resume"]:
        chat.session_id = args["--resume"]
        params = {"sessionId": chat.session_id, "cwd": cwd}
        if args["--replay"]:
            params["replayFrom"] = {"type": "start"}
        started = chat.call("session/resume", params,
                            on_update=lambda u: chat.renderer.update(dict(u, _replay=True)))
    else:
        started = chat.call("session/new", {"cwd": cwd})
        chat.session_id = started["sessionId"]
    terminal.note(terminal.banner(started, chat.session_id, cwd, chat.conn.log))
    chat.renderer.update({"sessionUpdate": "config_option_update",  # the mode it starts in
                          "configOptions": started.get("configOptions") or []})
    if args["<prompt>"]:
        reason = chat.turn(args["<prompt>"])
        return 0 if reason in ("end_turn", "max_tokens", "max_turn_requests") else 1
    terminal.line_editing()
    while True:
        try:
            text = input("> " if sys.stdin.isatty() else "")
        except EOFError:
            return 0
        if not text.strip():
            return 0
        if text.strip() == "/help":
            chat.drain()  # the commands update follows the session's answer
            print(terminal.help_text(chat.commands))
            continue
        chat.turn(text)


if __name__ == "__main__":
    raise SystemExit(main())
