"""Recorded sessions as tests: :func:`export` writes one (what ``term2acp sessions export ID
--format pytest -o DIR`` does), :func:`replay` is what the written test calls.

:func:`replay` runs the real agent (the test kit's :class:`AgentProcess`: in the test
process under gevent, else a process) with the scripted provider playing the recorded
replies, on a fresh copy of the case's ``workspace/``; it sends the recorded prompts,
answers each permission question with the recorded answer (by option kind), and compares
with ``recording.json``: per prompt the tool calls (names, inputs, statuses), the questions
(titles, options, answers), the final answer and how the turn ended, then the files the
session left. A
mismatch fails with a diff that names the prompt, the part and what changed.
"""

import difflib
import json
import os
import shutil

from term2acp.headless.render import in_call_order
from term2acp.testing.harness import AgentProcess

PLACEHOLDER = "<work>"
STOPS = {"_term2_error": "failed", "_term2_max_cost": "max_cost"}  # wire -> recorded reasons
SCRUB = ("OPENAI_", "ANTHROPIC_", "TERM2ACP_", "GEMINI_", "GOOGLE_", "AWS_", "AZURE_")


class ReplayMismatch(AssertionError):
    pass


def export(session_id, directory, workspace=None, data_dir=None):
    """Write the pytest test of a stored session into ``directory`` (as the command does);
    returns the test file's path. ``data_dir``: the agent's data directory (default: the
    one ``TERM2ACP_HOME`` or the defaults name). Runs under gevent (the store's thread)."""
    from term2acp.headless import pytest_export
    from term2acp.sessions import transfer
    from term2acp.sessions.store.api import Store
    from term2acp.settings import Settings

    settings = Settings.load({"data_dir": data_dir} if data_dir else None)
    store = Store(os.path.join(settings.data_dir, "sessions.sqlite3")).open()
    try:
        document = transfer.dump(store, session_id)
    finally:
        store.close()
    if document is None:
        raise LookupError(f"no session {session_id} in {settings.data_dir}")
    return pytest_export.write(document, directory, workspace)


def replay(case, tmp_path, protocol=2, timeout=60):
    """Replay the recorded session in the folder ``case``; raises :class:`ReplayMismatch`."""
    tmp = os.path.realpath(str(tmp_path))
    work = os.path.join(tmp, "work")
    shutil.copytree(os.path.join(case, "workspace"), work, symlinks=True)
    with open(os.path.join(case, "recording.json"), encoding="utf-8") as fh:
        expected = json.load(fh)
    with open(os.path.join(case, "script.json"), encoding="utf-8") as fh:
        script = fh.read().replace(json.dumps(PLACEHOLDER)[1:-1], work)
    script_path = os.path.join(tmp, "script.json")
    with open(script_path, "w", encoding="utf-8") as fh:
        fh.write(script)
    env = {k: v for k, v in os.environ.items() if not k.startswith(SCRUB)}
    os.makedirs(os.path.join(tmp, "home"), exist_ok=True)
    env.update(TERM2ACP_HOME=os.path.join(tmp, "home"), TERM2ACP_SCRIPT=script_path,
               TERM2ACP_CONFIG=os.path.join(tmp, "config.toml"),
               XDG_CONFIG_HOME=os.path.join(tmp, "xdg-config"))
    agent = AgentProcess(["--provider", "scripted"], env=env, protocol=protocol).start()
    try:
        agent.initialize()
        sid = agent.new_session(work)
        if expected.get("mode") and expected["mode"] != "auto":
            agent.request("session/set_config_option",
                          {"sessionId": sid, "configId": "mode", "value": expected["mode"]})
        got = [_prompt(agent, sid, turn, work, timeout) for turn in expected["prompts"]]
        agent.close()
    finally:
        agent.dispose()
    problems = []
    for number, (want, have) in enumerate(zip(expected["prompts"], got), 1):
        label = f"prompt {number} ({want['prompt'][:40]!r})"
        for part in ("tool_calls", "permissions", "answer", "stop"):
            if want.get(part, have[part]) != have[part]:  # (an older export has no stop)
                problems += _items(label, part, want[part], have[part])
                problems.append(_diff(f"{label}: {part}", want[part], have[part]))
    for rel, text in sorted(expected["files"].items()):
        now = _read(os.path.join(work, rel))
        if now != text:
            problems.append(_diff(f"file {rel}", text, now))
    if problems:
        raise ReplayMismatch("the replay differs from the recording (- recorded, + now):\n"
                             + "\n".join(problems))


def _prompt(agent, sid, turn, work, timeout):
    asked = list(turn["permissions"])
    questions = []

    def answer(message):
        if message.get("method") != "session/request_permission":
            return None
        params = message["params"]
        kinds = [o["kind"] for o in params["options"]]
        recorded = asked.pop(0) if asked else {}
        wanted = recorded.get("answer") or "reject_once"
        questions.append({"title": _here(params.get("title"), work), "options": kinds,
                          "answer": wanted if wanted in kinds else None})
        option = next((o for o in params["options"] if o["kind"] == wanted), None)
        if option is None:
            return {"outcome": {"outcome": "cancelled"}}
        return {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}

    _response, updates, end = agent.prompt(sid, turn["prompt"], timeout, on_request=answer)
    stop = end["params"]["update"].get("stopReason")
    calls, parents, messages = {}, {}, {}
    for update in updates:
        kind = update.get("sessionUpdate")
        if kind == "tool_call_update":
            call = calls.setdefault(update["toolCallId"], {"name": None, "input": None,
                                                           "status": None})
            parent = ((update.get("_meta") or {}).get("term2") or {}).get("parentToolCallId")
            parents.setdefault(update["toolCallId"], parent)
            for key, field in (("name", "name"), ("input", "rawInput"), ("status", "status")):
                if field in update:
                    call[key] = update[field]
            if call["name"] is None and update.get("title"):
                call["name"] = update["title"]
        elif kind == "agent_message_chunk":
            text = (update.get("content") or {}).get("text") or ""
            messages.setdefault(update.get("messageId"), []).append(text)
    answers = ["".join(parts) for parts in messages.values()]
    ordered = in_call_order([(i, parents.get(i), c) for i, c in calls.items()])
    return {"tool_calls": [_here(c, work) for c in ordered], "permissions": questions,
            "answer": answers[-1] if answers else None, "stop": STOPS.get(stop, stop)}


def _here(value, work):
    if isinstance(value, str):
        return value.replace(work, PLACEHOLDER)
    if isinstance(value, list):
        return [_here(v, work) for v in value]
    if isinstance(value, dict):
        return {k: _here(v, work) for k, v in value.items()}
    return value


def _read(path):
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        return f"<unreadable: {exc}>"


def _items(label, part, want, have):
    """One line per tool call or question that differs: which one, and what of it."""
    if not isinstance(want, list) or not isinstance(have, list):
        return []
    lines = []
    if len(want) != len(have):
        lines.append(f"{label}: {len(want)} {part} recorded, {len(have)} now")
    for n, (a, b) in enumerate(zip(want, have), 1):
        if a != b:
            fields = ", ".join(f"{key} {a.get(key)!r} -> {b.get(key)!r}" for key in a
                               if a.get(key) != b.get(key))
            name = a.get("name") or a.get("title")
            lines.append(f"{label}: {part[:-1].replace('_', ' ')} {n} ({name}): {fields}")
    return lines


def _diff(label, want, have):
    def lines(value):
        if isinstance(value, str):
            return value.splitlines()
        return json.dumps(value, indent=1, ensure_ascii=False, sort_keys=True).splitlines()
    body = "\n".join(difflib.unified_diff(lines(want), lines(have), "recorded", "now",
                                          lineterm="", n=2))
    return f"--- {label}:\n{body or f'{want!r} != {have!r}'}"
