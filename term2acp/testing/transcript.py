"""Recorded wire transcripts: replay the client's lines, compare the agent's, normalised.

File format (``NNN_name.transcript``)::

    # script: {"turns": [[{"text": "Hello"}]]}      header lines: '# key: value'
    # approve: allow-once                           answer to every permission request
    > {"jsonrpc":"2.0","id":1,"method":"initialize","params":{...}}
    < {"jsonrpc":"2.0","id":1,"result":{...}}
    ~ until "state":"idle"                          wait until a received line contains text
    < ...

``>`` lines are sent (placeholders such as ``<work>`` and ``<session:1>`` are filled in);
after a request the driver waits for its response. ``~ until TEXT`` waits until a
received, normalised line contains TEXT. ``<`` lines are what the agent must send, in
order, after normalisation: the workspace becomes ``<work>``; session, tool-call, message
and terminal ids are numbered by first appearance (``<session:1>``, ``<tool:1>``,
``<msg:1>``, ``<term:1>``); timestamps become ``<time>``. Headers: ``script`` (inline JSON
or a file next to the transcript), ``approve`` (an option id, ``cancelled``, or ``never``),
``protocol`` (``1`` validates against the v1 schema and plays the editor's ``fs/*`` from the
disk; default ``2``), ``args``
(extra agent flags), ``env`` (JSON object), ``files`` (JSON object: path relative to the
workspace, ``../`` allowed, -> text, written before the run). The workspace's parent
directory is normalised to ``<tmp>``.
"""

import json
import os
import re

from term2acp.testing.harness import AgentProcess

_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")
_ID_KEYS = {"sessionId": "session", "toolCallId": "tool", "messageId": "msg",
            "terminalId": "term"}


class Normalizer:
    def __init__(self, workspace):
        self.workspace = workspace
        self.parent = os.path.dirname(workspace)
        self.ids = {}  # (kind, real) -> placeholder
        self.real = {}  # placeholder -> real

    def _placeholder(self, kind, value):
        key = (kind, value)
        if key not in self.ids:
            count = sum(1 for k in self.ids if k[0] == kind) + 1
            self.ids[key] = f"<{kind}:{count}>"
            self.real[self.ids[key]] = value
        return self.ids[key]

    def normalize(self, value, key=None):
        if isinstance(value, dict):
            return {k: self.normalize(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self.normalize(v) for v in value]
        if isinstance(value, str):
            if key in _ID_KEYS:
                return self._placeholder(_ID_KEYS[key], value)
            value = value.replace(self.workspace, "<work>").replace(self.parent, "<tmp>")
            return _TIME.sub("<time>", value)
        return value

    def fill(self, text):
        text = text.replace("<work>", self.workspace).replace("<tmp>", self.parent)
        return re.sub(r"<(session|tool|msg|term):\d+>", lambda m: self.real.get(m.group(0), m.group(0)), text)


def dumps(message):
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def parse(path):
    headers, steps, expected = {}, [], []
    with open(path, encoding="utf-8") as fh:
        for raw in fh:
            line = raw.rstrip("\n")
            if line.startswith("# ") and not steps and ":" in line:
                key, _, value = line[2:].partition(":")
                headers[key.strip()] = value.strip()
            elif line[:2] in ("> ", "~ "):
                steps.append((line[0], line[2:]))
            elif line[:2] == "< ":
                expected.append(line[2:])
    return headers, steps, expected


def script_from(headers, path, tmp, fill):
    spec = headers.get("script")
    if not spec:
        return None
    if spec.lstrip().startswith("{"):
        target = os.path.join(tmp, "script.json")
        with open(target, "w", encoding="utf-8") as fh:
            fh.write(fill(spec))
        return target
    return os.path.join(os.path.dirname(path), spec)


class TranscriptRun:
    """Play one transcript against a fresh agent; returns the normalised received lines."""

    def __init__(self, path, workspace, env, tmp, command=None):
        self.path = path
        self.headers, self.steps, self._expected = parse(path)
        self.norm = Normalizer(workspace)
        full = dict(env)
        full.update(json.loads(self.headers.get("env", "{}")))
        args = self.headers.get("args", "").split()
        for rel, text in json.loads(self.headers.get("files", "{}")).items():
            target = os.path.normpath(os.path.join(workspace, rel))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w", encoding="utf-8") as fh:
                fh.write(text)
        script = script_from(self.headers, path, tmp, self.norm.fill)
        if script:
            full["TERM2ACP_SCRIPT"] = script
            if "--provider" not in args:
                args = ["--provider", "scripted"] + args
        self.agent = AgentProcess(args, env=full, command=command,
                                  protocol=int(self.headers.get("protocol", 2)))
        self.received = []
        self.approve = self.headers.get("approve", "reject")

    def _answer(self, message):
        if message.get("method") != "session/request_permission":
            return None  # v1 fs/* requests: the harness plays the editor from the disk
        if self.approve == "never":
            return None
        if self.approve == "cancelled":
            return {"outcome": {"outcome": "cancelled"}}
        return {"outcome": {"outcome": "selected", "optionId": self.approve}}

    def _take(self, predicate, timeout=20):
        def seen(message):
            line = dumps(self.norm.normalize(message))
            self.received.append(line)
            self.blocks[-1].append(line)
            return predicate(message, line)
        self.agent.wait_for(seen, timeout, on_request=self._answer)

    def run(self, timeout=20):
        self.blocks = []  # received lines per step, for rewriting
        self.agent.start()
        try:
            for kind, text in self.steps:
                self.blocks.append([])
                if kind == ">":
                    message = json.loads(self.norm.fill(text))
                    self.agent.send(message)
                    if isinstance(message, dict) and "id" in message and "method" in message:
                        self._take(lambda m, _l, i=message["id"]: isinstance(m, dict)
                                   and m.get("id") == i and "method" not in m, timeout)
                elif kind == "~":
                    needle = text.split("until", 1)[1].strip()
                    self._take(lambda _m, line, n=needle: n in line, timeout)
        finally:
            self.agent.close()
        return self.received

    def expected(self):
        return list(self._expected)

    def rewrite(self):
        """Write the transcript back with the received lines in place of the old ones."""
        with open(self.path, encoding="utf-8") as fh:
            lines = [line.rstrip("\n") for line in fh]
        out, blocks = [], iter(self.blocks)
        for line in lines:
            if line.startswith("< "):
                continue
            out.append(line)
            if line.startswith(("> ", "~ ")):
                out.extend("< " + r for r in next(blocks, []))
        with open(self.path, "w", encoding="utf-8") as fh:
            fh.write("\n".join(out) + "\n")
