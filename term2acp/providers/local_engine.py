"""The native engines behind the ``local`` provider, and how their tokens reach gevent.

Two engines read GGUF files, both llama.cpp:

* ``xllamacpp`` (the ``[local]`` extra): prebuilt manylinux wheels, no build step. Its
  in-process llama.cpp server is thread safe and streams chunks through a callback; the
  callback's return value stops the generation. The server's HTTP side is bound to a Unix
  socket in a private (0700) temporary folder with a random API key, never to a TCP port.
* ``llama-cpp-python``, used when it is installed and ``xllamacpp`` is not (a CUDA or
  Metal build someone already has): it compiles llama.cpp at install time.

Each generation runs whole in one thread of gevent's native thread pool. Pieces cross back
to the hub through a :class:`Channel` (a deque and a libev async watcher, the one gevent
primitive meant to be signalled from another thread), so the hub never blocks on native
code and a cancelled turn sets :attr:`Channel.stop`, which the engine checks at every token.
"""

import atexit
import collections
import importlib.util
import os
import shutil

import gevent
from gevent.event import Event

from term2acp.core import scratch

ENGINES = ("xllamacpp", "llama_cpp")  # import names, in order of preference
N_CTX = 8192


def available_engine():
    """The import name of the first installed engine, or None (nothing is imported)."""
    for name in ENGINES:
        if importlib.util.find_spec(name) is not None:
            return name
    return None


def threads():
    """Generation threads: half the cores, at most 4. llama.cpp's OpenMP threads spin while
    they wait: on a busy machine one thread per core each ran 10 to 25 times slower than a
    single thread (measured on 2 loaded cores: 2 to 5 tokens/s with 2 threads, 50 with 1).
    ``TERM2ACP_LOCAL_THREADS`` overrides it (the greedy answers depend on the thread count)."""
    configured = os.environ.get("TERM2ACP_LOCAL_THREADS", "")
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    return max(1, min(4, (os.cpu_count() or 1) // 2))


def batch_threads():
    """Prompt-processing threads: every core, at most 4 (big batches synchronise seldom, so
    the first prompt's processing scales with the cores; bench/local prints the counts)."""
    if os.environ.get("TERM2ACP_LOCAL_THREADS", "").isdigit():
        return threads()
    return max(1, min(4, os.cpu_count() or 1))


class Channel:
    """Pieces from a worker thread to one greenlet, in order, ending with ``finish``."""

    def __init__(self):
        self.items = collections.deque()
        self.stop = False  # set by the greenlet; the worker stops at its next token
        self.done = False
        self._ready = Event()
        self._watcher = gevent.get_hub().loop.async_()
        self._watcher.start(self._ready.set)

    # worker thread side
    def put(self, item):
        self.items.append(item)
        self._watcher.send()

    def finish(self):
        self.done = True
        self._watcher.send()

    # greenlet side
    def drain(self, timeout=5.0):
        """Everything that arrived; waits up to ``timeout`` for something to arrive."""
        self._ready.clear()
        if not self.items and not self.done:
            self._ready.wait(timeout)
        out = []
        while self.items:
            out.append(self.items.popleft())
        return out

    def close(self):
        self._watcher.stop()
        self._watcher.close()


class XllamacppEngine:
    name = "xllamacpp"

    def __init__(self, path):
        import xllamacpp

        self._folder = scratch.make("llama-")  # 0700
        atexit.register(shutil.rmtree, self._folder, True)
        params = xllamacpp.CommonParams()
        params.model.path = path
        params.n_ctx = N_CTX
        params.n_parallel = 1
        params.cpuparams.n_threads = threads()
        params.cpuparams_batch.n_threads = batch_threads()
        params.warmup = False
        params.verbosity = -1
        params.hostnames = [os.path.join(self._folder, "llama.sock")]
        params.api_keys = [os.urandom(16).hex()]
        try:
            self.server = xllamacpp.Server(params)
        except Exception:
            shutil.rmtree(self._folder, ignore_errors=True)
            raise

    def generate(self, messages, max_tokens, channel, stop=()):
        """Runs in a worker thread; returns the finish reason (``stop``, ``length``).

        ``stop``: strings that end the answer (left out of it)."""
        finish = [None]

        def on_chunk(chunk):
            if isinstance(chunk, dict):
                for choice in chunk.get("choices") or ():
                    text = (choice.get("delta") or {}).get("content")
                    if text:
                        channel.put(text)
                    finish[0] = choice.get("finish_reason") or finish[0]
                timings = chunk.get("timings")
                if timings:
                    channel.put(("usage", timings.get("prompt_n", 0) + timings.get("cache_n", 0),
                                 timings.get("predicted_n", 0), timings.get("cache_n", 0)))
            return channel.stop

        # temperature 0 and a fixed seed: the same prompt gives the same answer. DRY, not a
        # repetition penalty, keeps a small model out of loops: a repetition penalty also
        # punishes the braces and quotes of a tool call's JSON.
        result = self.server.handle_chat_completions(
            {"messages": messages, "stream": True, "max_tokens": max_tokens, "temperature": 0.0,
             "seed": 0, "dry_multiplier": 0.8, "repeat_penalty": 1.0, "stop": list(stop)}, on_chunk)
        if isinstance(result, dict) and "error" in result:
            raise RuntimeError((result["error"] or {}).get("message") or str(result["error"]))
        return finish[0]


class LlamaCppEngine:
    name = "llama_cpp"

    def __init__(self, path):
        from llama_cpp import Llama

        self.llama = Llama(model_path=path, n_ctx=N_CTX, n_threads=threads(),
                           n_threads_batch=batch_threads(), chat_format="chatml",
                           verbose=False, seed=0)

    def generate(self, messages, max_tokens, channel, stop=()):
        chunks = self.llama.create_chat_completion(
            messages=messages, stream=True, temperature=0.0, repeat_penalty=1.3, max_tokens=max_tokens,
            stop=list(stop) or None)
        finish = None
        try:
            for chunk in chunks:
                choice = (chunk.get("choices") or [{}])[0]
                text = (choice.get("delta") or {}).get("content")
                if text:
                    channel.put(text)
                finish = choice.get("finish_reason") or finish
                if channel.stop:
                    break
        finally:
            getattr(chunks, "close", lambda: None)()
        return finish


def create(engine, path):
    """A loaded engine (blocking: call it in a worker thread)."""
    return (XllamacppEngine if engine == "xllamacpp" else LlamaCppEngine)(path)
