"""A scripted multi-turn coding session against the recording fake model server.

:class:`ScenarioModel` is a fake server's responder that plays a model: each prompt names
its step (``[[s1]]``); the step's rounds of tool calls are answered in order (the round is
found from the tool results already in the request, so a restarted agent carries on), then
a closing text. A request without tools is a compaction's summary request. Every request
is accounted in a :class:`~tests.support.prompt_cache.Ledger`, whose figures the answers'
usage reports as the real servers do (cache reads and writes).

Faithful to the servers on what the agent must get right: Anthropic refuses (400) a
request with thinking on whose final assistant turn with tool calls does not start with
the thinking block it was given, signature and text unchanged.

:func:`run_session` drives the agent (``bin/term2-acp``, Zed-shaped ACP v1 or v2) through
the session the cost benchmark and its e2e test use: tool calls, a mode switch,
``/compact``, a restart and ``session/load`` (v1) or ``session/resume`` (v2).
"""

import hashlib
import json

from term2acp.testing.harness import AgentProcess
from tests.support import fake_llm as f
from tests.support.prompt_cache import Ledger

PLAN = {
    "s1": [[("read_file", {"path": "notes.md"})],
           [("read_file", {"path": "app.py"}), ("list_directory", {"path": "."})]],
    "s2": [[("edit_file", {"path": "app.py", "edits": [
        {"old_text": "return 1", "new_text": "return 2"}]})],
           [("read_file", {"path": "app.py"})]],
    "s3": [[("read_file", {"path": "notes.md", "start_line": 1, "end_line": 3})],
           [("list_directory", {"path": "."}), ("read_file", {"path": "app.py"})]],
    "s4": [[("read_file", {"path": "app.py"})]],
    "s5": [[("read_file", {"path": "notes.md"})], [("read_file", {"path": "app.py"})]],
}
PROMPTS = {
    "s1": "[[s1]] Read notes.md and app.py and tell me what the project does.",
    "s2": "[[s2]] Change the return value of main in app.py to 2.",
    "s3": "[[s3]] Now only look around: which files mention main?",
    "s4": "[[s4]] Summarise app.py once more.",
    "s5": "[[s5]] After the restart: check notes.md against app.py.",
}
NOTES = "\n".join(f"Line {n}: the project keeps its notes here, item {n}." for n in range(1, 120))
APP = "def main():\n    return 1\n\n\n" + "\n".join(
    f"def helper_{n}(value):\n    return value * {n}\n" for n in range(1, 60))


def write_workspace(root):
    with open(f"{root}/notes.md", "w") as fh:
        fh.write(NOTES + "\n")
    with open(f"{root}/app.py", "w") as fh:
        fh.write(APP)


class ScenarioModel:
    """The responder (``FakeLLMServer.responder``): plays :data:`PLAN`."""

    def __init__(self, provider):
        self.ledger = Ledger(provider)
        self.signatures = {}  # signature -> thinking text we issued
        self.refused = []  # (request number, reason)

    def __call__(self, request):
        kind = "anthropic" if request.path.endswith("/messages") else \
            "responses" if request.path.endswith("/responses") else "chat"
        body = request.json
        row = self.ledger.record(kind, request.body)
        if kind == "anthropic":
            problem = self._check_thinking(body)
            if problem:
                self.refused.append((row.number, problem))
                return f.Status(400, {"type": "error", "error": {
                    "type": "invalid_request_error", "message": problem}})
        step, done = self._where(kind, body)
        rounds = PLAN.get(step) if body.get("tools") else None
        calls = None
        if rounds is not None and done < len(rounds):
            calls = [(f"call_{row.number}_{n}", name, json.dumps(args))
                     for n, (name, args) in enumerate(rounds[done])]
        text = "Summary: the user works on app.py and notes.md." if rounds is None and \
            not body.get("tools") else f"Done with {step}." if calls is None else \
            "Looking at it."
        return self._answer(kind, body, row, text, calls)

    # ------------------------------------------------------------ reading the request
    def _where(self, kind, body):
        """``(step, rounds answered)``: the latest tagged prompt and the tool rounds after it."""
        items = body.get("input") if kind == "responses" else body.get("messages")
        step, results = None, []
        for item in items or ():
            text = json.dumps(item)
            for name in PLAN:
                if f"[[{name}]]" in text:
                    step, results = name, []
            results.extend(_result_ids(kind, item))
        rounds, answered, total = PLAN.get(step) or [], 0, 0
        for calls in rounds:
            if total + len(calls) > len(results):
                break
            total += len(calls)
            answered += 1
        return step, answered

    def _check_thinking(self, body):
        if not body.get("thinking"):
            return None
        messages = body.get("messages") or []
        last = next((m for m in reversed(messages) if m["role"] == "assistant"), None)
        if last is None or not any(b.get("type") == "tool_use" for b in last["content"]):
            return None
        first = last["content"][0]
        if first.get("type") not in ("thinking", "redacted_thinking"):
            return ("messages: Expected `thinking` or `redacted_thinking`, but found "
                    f"`{first.get('type')}`. When `thinking` is enabled, a final `assistant` "
                    "message must start with a thinking block.")
        if self.signatures.get(first.get("signature")) != first.get("thinking"):
            return "messages: Invalid `signature` in `thinking` block"
        return None

    # ------------------------------------------------------------ answers
    def _answer(self, kind, body, row, text, calls):
        if kind == "anthropic":
            return self._anthropic(body, row, text, calls)
        if kind == "responses":
            return self._responses(body, row, text, calls)
        chunks = [f.oa_text(text)]
        for index, (call_id, name, args) in enumerate(calls or ()):
            chunks.append(f.oa_tool(index, call_id, name, args))
        chunks.append(f.oa_finish("tool_calls" if calls else "stop"))
        total = row.read + row.written + row.uncached
        chunks.append(f.oa_usage(total, 20, cached=row.read))
        return f.openai_sse(*chunks)

    def _anthropic(self, body, row, text, calls):
        events, index = f.an_start(row.uncached, row.read, row.written), 0
        if body.get("thinking"):
            thought = f"Thinking about request {row.number}."
            signature = hashlib.sha256(thought.encode()).hexdigest()
            self.signatures[signature] = thought
            events += f.an_thinking(0, thought, signature=signature)
            index = 1
        events += f.an_text(index, text)
        for offset, (call_id, name, args) in enumerate(calls or (), start=index + 1):
            events += f.an_tool(offset, call_id, name, args)
        events += f.an_end("tool_use" if calls else "end_turn", 20)
        return f.anthropic_sse(events)

    def _responses(self, body, row, text, calls):
        from tests.support import fake_responses as fr

        return fr.scenario_answer(self, body, row, text, calls)


def _result_ids(kind, item):
    if kind == "anthropic":
        content = item.get("content") if item.get("role") == "user" else None
        return [b.get("tool_use_id") for b in content or () if isinstance(b, dict)
                and b.get("type") == "tool_result"]
    if kind == "responses":
        return [item.get("call_id")] if item.get("type") == "function_call_output" else []
    return [item.get("tool_call_id")] if item.get("role") == "tool" else []


# ---------------------------------------------------------------- the session
def provider_env(provider, server):
    if provider == "anthropic":
        return {"ANTHROPIC_BASE_URL": server.root_url, "ANTHROPIC_API_KEY": "sk-ant-bench"}
    return {"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "sk-bench"}


def run_session(env, workspace, args, protocol=1, timeout=60, restarting=None):
    """Play the scenario through two agent processes; returns the stop reasons and the two
    agents. ``restarting``: called between the two processes."""
    stops = []

    def prompt(agent, sid, text):
        _, _, end = agent.prompt(sid, text, timeout=timeout)
        stops.append(end["result"]["stopReason"] if protocol == 1
                     else end["params"]["update"]["stopReason"])

    agent = AgentProcess(args, env=env, protocol=protocol).start()
    try:
        agent.initialize()
        params = {"cwd": str(workspace)}
        if protocol == 1:
            params["mcpServers"] = []
        sid = agent.request("session/new", params)["result"]["sessionId"]
        prompt(agent, sid, PROMPTS["s1"])
        prompt(agent, sid, PROMPTS["s2"])
        answer = agent.request("session/set_config_option",
                               {"sessionId": sid, "configId": "mode", "value": "read-only"})
        assert "result" in answer, answer
        prompt(agent, sid, PROMPTS["s3"])
        prompt(agent, sid, "/compact")
        prompt(agent, sid, PROMPTS["s4"])
    finally:
        agent.close()
    if restarting is not None:
        restarting()
    again = AgentProcess(args, env=env, protocol=protocol).start()
    try:
        again.initialize()
        if protocol == 1:
            answer = again.request("session/load", {"sessionId": sid, "cwd": str(workspace),
                                                    "mcpServers": []}, timeout=30)
        else:
            answer = again.request("session/resume", {"sessionId": sid, "cwd": str(workspace)},
                                   timeout=30)
        assert "result" in answer, answer
        prompt(again, sid, PROMPTS["s5"])
    finally:
        again.close()
    return stops, agent, again
