"""The scripted provider: replays model turns from a JSON script file. Deterministic.

It is first class: the project's own tests, users' transcript tests and demos use it.
Select it with ``--provider scripted`` and point ``TERM2ACP_SCRIPT`` at a file::

    {
      "context_window": 128000,
      "turns": [
        [{"thought": "Let me look."},
         {"tool_call": {"name": "read_file", "arguments": {"path": "README.md"}}}],
        [{"text": "It says hello."}, {"usage": {"input": 120, "output": 8}},
         {"stop": "end_turn"}]
      ]
    }

Each model request plays the turn whose index is the number of assistant messages in
the conversation so far, so a resumed session continues where it left off. Steps:

* ``{"text": str}`` / ``{"thought": str}``: a text or reasoning delta;
* ``{"repeat": {"text": str, "count": n}}``: n text deltas (for long answers);
* ``{"tool_call": {"name": str, "arguments": object | str, "id"?: str}}``: a tool call
  (a string is sent verbatim, so malformed JSON can be scripted);
* ``{"usage": {"input": n, "output": n, "cached": n?, "thought": n?, "cost": usd?}}``;
* ``{"delay": seconds}``: a cooperative pause; ``{"hang": true}`` waits until cancelled;
* ``{"error": str}``: the provider fails with that message;
* ``{"stop": "end_turn" | "tool_use" | "max_tokens" | "refusal"}`` (default: ``tool_use``
  when the turn made tool calls, else ``end_turn``).

``"sequential": true`` plays the turns in the order of this provider's requests instead
(a recorded session's replies, ``term2acp sessions export --format pytest``: a reply that
left no assistant message still takes its turn); with ``"agents"`` beside it (one entry a
turn: null, or the id of the agent call whose sub-agent got that reply) each sub-agent
plays its own turns in order and the session's turn the others, however the children's
requests interleave. Optional keys for context-window tests: ``"default_turn"`` (steps played when the script
has no turn at that index, e.g. after a compaction shortened the conversation),
``"summary"`` (the text a compaction request gets; default a fixed sentence),
``"title"`` (what the session's title request gets; without it the request fails and
the session keeps the user's words),
``"context_limit"`` (characters of system prompt plus message content: a bigger request
fails like an OpenAI-compatible server's ``context_length_exceeded``, its maximum told in
tokens at 4 characters each; ``"context_limit_over_system"`` raises it to the system
prompt plus that many characters when larger), and ``"record"`` (a file that gets one JSON
line per request: purpose, characters, refused).
"""

import json
from itertools import repeat

import gevent
from gevent.event import Event

from term2acp.core.pacing import breathe, overdue
from term2acp.providers.errors import ContextOverflow
from term2acp.providers.base import (
    Provider,
    ProviderError,
    ProviderNotConfigured,
    Stop,
    TextDelta,
    ThoughtDelta,
    ToolCall,
    Usage,
)


def load_script(path):
    if not path:
        raise ProviderNotConfigured(
            "the scripted provider needs a script: set TERM2ACP_SCRIPT=/path/to/script.json")
    try:
        with open(path, encoding="utf-8") as fh:
            script = json.load(fh)
    except (OSError, ValueError) as exc:
        raise ProviderNotConfigured(f"cannot read the script {path}: {exc}") from None
    if not isinstance(script, dict) or not isinstance(script.get("turns"), list):
        raise ProviderNotConfigured(f"{path}: a script is an object with a \"turns\" array")
    return script


class ScriptedProvider(Provider):
    name = "scripted"

    def __init__(self, script_path):
        self.path = script_path
        self.script = load_script(script_path)
        self.played = 0  # turn requests so far (for "sequential")
        self._cursors = {}  # requester (None, or an agent call id) -> where its next turn is

    def context_window(self, model):
        return self.script.get("context_window", 128000)

    def _limit(self, request):
        """Refuse a request over the scripted context limit (and record every request)."""
        limit = self.script.get("context_limit")
        if not limit and not self.script.get("record"):
            return
        size = len(request.system or "") + sum(len(m.get("content") or "")
                                               for m in request.messages)
        if limit and self.script.get("context_limit_over_system"):
            limit = max(limit, len(request.system or "") + self.script["context_limit_over_system"])
        refused = bool(limit) and size > limit
        if self.script.get("record"):
            with open(self.script["record"], "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"purpose": getattr(request, "purpose", "turn"),
                                     "chars": size, "limit": limit, "refused": refused}) + "\n")
        if refused:
            raise ContextOverflow(
                f"scripted: context window exceeded: This model's maximum context length is "
                f"{limit // 4} tokens. However, your messages resulted in {size // 4} tokens. "
                "Please reduce the length of the messages.", 400, "context_length_exceeded")

    def _next_index(self, request):
        """The next turn of the requester in a sequential script (module docstring)."""
        agents = self.script.get("agents")
        if not isinstance(agents, list):
            index, self.played = self.played, self.played + 1
            return index
        who = request.agent
        start = self._cursors.get(who, 0)
        index = next((i for i in range(start, len(agents)) if agents[i] == who),
                     len(self.script["turns"]))
        self._cursors[who] = index + 1
        return index

    def stream(self, request):
        if getattr(request, "purpose", "turn") == "title":  # sessions/titles.py
            if not self.script.get("title"):
                raise ProviderError("scripted provider: the script has no \"title\"")
            yield TextDelta(str(self.script["title"]))
            yield Stop("end_turn")
            return
        self._limit(request)
        if getattr(request, "purpose", "turn") == "compaction":
            yield TextDelta(str(self.script.get("summary", "The user and the agent talked; "
                                                "nothing else to keep.")))
            yield Stop("end_turn")
            return
        if self.script.get("sequential"):
            index = self._next_index(request)
        else:
            # the roles in one C-level pass: a script is replayed against long sessions too
            index = list(map(dict.get, request.messages, repeat("role"))).count("assistant")
        turns = self.script["turns"]
        if index >= len(turns) and isinstance(self.script.get("default_turn"), list):
            turns = turns + [self.script["default_turn"]] * (index + 1 - len(turns))
        if index >= len(turns):
            raise ProviderError(f"scripted provider: the script has no turn {index + 1} "
                                f"(it has {len(turns)})")
        called = False
        stop = None
        for n, step in enumerate(turns[index]):
            if not isinstance(step, dict) or len(step) != 1:
                raise ProviderError(f"scripted provider: turn {index + 1} step {n + 1} "
                                    "must be an object with one key")
            (key, value), = step.items()
            if key == "text":
                yield TextDelta(str(value))
            elif key == "thought":
                yield ThoughtDelta(str(value))
            elif key == "repeat":
                text = str(value.get("text", ""))
                for n in range(int(value.get("count", 1))):
                    yield TextDelta(text)
                    if overdue():  # like a network stream: the writer flushes, stdin is read
                        breathe()
            elif key == "tool_call":
                called = True
                yield _tool_call(value, index, n)
            elif key == "usage":
                yield Usage(input_tokens=int(value.get("input", 0)),
                            output_tokens=int(value.get("output", 0)),
                            cached_tokens=int(value.get("cached") or 0),
                            thought_tokens=int(value.get("thought") or 0),
                            cost_usd=value.get("cost"))
            elif key == "delay":
                gevent.sleep(float(value))
            elif key == "hang":
                Event().wait()  # until the turn is cancelled
            elif key == "error":
                raise ProviderError(str(value))
            elif key == "stop":
                stop = str(value)
            else:
                raise ProviderError(f"scripted provider: unknown step {key!r}")
        yield Stop(stop or ("tool_use" if called else "end_turn"))


def _tool_call(value, turn, step):
    arguments = value.get("arguments", {})
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    return ToolCall(call_id=str(value.get("id") or f"call_{turn + 1}_{step + 1}"),
                    name=str(value.get("name", "")), arguments=arguments)
