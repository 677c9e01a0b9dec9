"""A session export (``sessions/transfer.py``'s document) read as turns, and as Markdown.

A turn is what one prompt did: its prompt, what happened in order (thoughts, answers, tool
calls with their inputs, outputs and diffs, terminals), the permission questions with their
options and answers, the model's replies with their usage and cost.
"""

import json


def turns(document):
    """The document's prompts, in order: dicts with ``id``, ``prompt``, ``events`` (``(kind,
    payload)``: thought, answer, tool, terminal, plan, compaction), ``permissions``,
    ``replies``, ``usage``, ``cost``, ``answer`` (the last agent message)."""
    out, by_id = [], {}
    current = None
    for record in document.get("journal", []):
        kind, payload = record["kind"], record["payload"]
        if kind == "user_message":
            current = _turn(payload.get("message_id"), prompt_text(payload.get("content")))
            out.append(current)
            by_id[current["id"]] = current
            continue
        if current is None:
            current = _turn(None, "")
            out.append(current)
        if kind == "agent_message":
            current["events"].append(("answer", payload.get("text", "")))
            current["answer"] = payload.get("text", "")
        elif kind == "agent_thought":
            current["events"].append(("thought", payload.get("text", "")))
        elif kind == "tool_call":
            current["events"].append(("tool", payload))
        elif kind in ("terminal", "plan", "compaction"):
            current["events"].append((kind, payload))
    for item in document.get("recording", []):
        turn = by_id.get(item.get("turn"))
        if turn is None:
            continue
        if item["kind"] == "reply":
            turn["replies"].append(item["payload"])
        elif item["kind"] == "permission":
            turn["permissions"].append(item["payload"])
        elif item["kind"] == "outcome":
            turn["stop"] = item["payload"].get("reason")
    for turn in out:
        turn["usage"] = usage_sum(r.get("usage") for r in turn["replies"])
        turn["cost"] = round(sum(r.get("cost") or 0 for r in turn["replies"]), 8)
    return out


def in_call_order(entries):
    """The values of ``entries`` (``(call id, parent call id or None, value)``, in the order
    the calls first appeared), each call followed by the calls of its sub-agent: the order
    a recording and its replay agree on, whatever order children side by side ran in."""
    below = {}
    for call_id, parent, value in entries:
        below.setdefault(parent, []).append((call_id, value))
    known = {call_id for call_id, _parent, _value in entries}
    out = []

    def add(parent):
        for call_id, value in below.pop(parent, ()):
            out.append(value)
            add(call_id)
    add(None)
    for parent in [p for p in below if p not in known]:  # a parent the turn did not show
        add(parent)
    return out


def _turn(message_id, prompt):
    return {"id": message_id, "prompt": prompt, "events": [], "permissions": [],
            "replies": [], "answer": None, "stop": None}


def prompt_text(content):
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(block.get("text", ""))
        elif isinstance(block, dict):
            parts.append(f"[{block.get('type')}: {block.get('uri') or block.get('name') or ''}]")
    return "".join(parts)


def usage_sum(items):
    total = {"input": 0, "output": 0, "cached": 0}
    for usage in items:
        for key in total:
            total[key] += (usage or {}).get(key) or 0
    return total


def summary(document):
    """Per turn and in all: the prompt, the final answer, the models, the model requests,
    the usage and the cost (the JSON export's ``summary``; import ignores it)."""
    rows = [{"prompt": t["prompt"], "answer": t["answer"], "stopReason": t["stop"],
             "models": sorted({r.get("model") or "?" for r in t["replies"]}),
             "modelRequests": len(t["replies"]), "usage": t["usage"], "costUsd": t["cost"]}
            for t in turns(document)]
    return {"turns": rows, "modelRequests": sum(r["modelRequests"] for r in rows),
            "usage": usage_sum(r["usage"] for r in rows),
            "costUsd": round(sum(r["costUsd"] for r in rows), 8)}


def markdown(document):
    session = document["session"]
    all_turns = turns(document)
    usage = usage_sum(t["usage"] for t in all_turns)
    cost = round(sum(t["cost"] for t in all_turns), 6)
    lines = [f"# {session.get('title') or 'Session'}", "",
             f"- Session: `{session['id']}`", f"- Folder: `{session['cwd']}`",
             f"- Model: {session.get('provider') or '?'} / {session.get('model') or '?'}"
             f" (effort {session.get('effort') or 'default'}, mode {session.get('mode') or 'auto'})",
             f"- Created: {session.get('created_at')}, updated: {session.get('updated_at')}",
             f"- Usage: {_usage_line(usage, cost)}", ""]
    for number, turn in enumerate(all_turns, 1):
        lines += [f"## Turn {number}", "", "**User:**", "", _quote(turn["prompt"]), ""]
        asked = {p.get("call_id"): p for p in turn["permissions"]}
        for kind, payload in turn["events"]:
            lines += _event(kind, payload, asked)
        models = sorted({r.get("model") or "?" for r in turn["replies"]})
        lines += [f"_Ended: {turn['stop'] or '?'}; model requests: {len(turn['replies'])} "
                  f"({', '.join(models) or '-'}); "
                  f"usage: {_usage_line(turn['usage'], turn['cost'])}_", ""]
    return "\n".join(lines)


def _usage_line(usage, cost):
    return (f"{usage['input']} input tokens ({usage['cached']} cached), {usage['output']} "
            f"output tokens, ${cost:.6f}")


def _quote(text):
    return "\n".join("> " + line for line in (text or "").splitlines()) or ">"


def _event(kind, payload, asked):
    if kind == "answer":
        return ["**Agent:**", "", payload, ""]
    if kind == "thought":
        return ["<details><summary>Thought</summary>", "", payload, "", "</details>", ""]
    if kind == "terminal":
        return [f"**Terminal** `{payload.get('command')}` exit {payload.get('exit')}", ""]
    if kind == "plan":
        return ["**Plan:**", ""] + [f"- [{e.get('status')}] {e.get('content')}"
                                     for e in payload.get("entries") or []] + [""]
    if kind == "compaction":
        return [f"_Compaction: {payload.get('status')}_", ""]
    lines = [f"**Tool call** `{payload.get('name') or payload.get('title')}`: "
             f"{payload.get('title')} ({payload.get('status')})", "",
             "```json", json.dumps(payload.get("raw_input"), indent=2, ensure_ascii=False),
             "```", ""]
    question = asked.get(payload.get("call_id"))
    if question is not None:
        options = ", ".join(f"{o['name']} ({o['kind']})" for o in question.get("options", []))
        decision = question.get("decision") or {}
        answer = next((o["name"] for o in question.get("options", [])
                       if o["optionId"] == decision.get("optionId")), None)
        lines += [f"**Permission asked:** {question.get('title')}", "",
                  f"Options: {options}", "",
                  f"Answer: {answer or 'refused'}"
                  + (f" ({decision.get('reason')})" if decision.get("reason") else ""), ""]
    for item in payload.get("content") or []:
        if item.get("type") == "diff":
            lines += ["```diff", _diff(item), "```", ""]
        elif item.get("type") == "text":
            lines += ["```", item.get("text", ""), "```", ""]
    return lines


def _diff(item):
    import difflib

    old = (item.get("old") or "").splitlines()
    new = (item.get("new") or "").splitlines()
    path = item.get("path", "")
    return "\n".join(difflib.unified_diff(old, new, f"a/{path}", f"b/{path}", lineterm=""))
